#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
internal import ReceiptEngine
internal import CryptoFloor

/// The folder `receiptd testing init-ca` writes a test PKI to: certificates readable by all, keys by the owner only.
struct PKIFolder {
    let directory: String

    init(_ directory: String) { self.directory = directory }

    /// Creates the folder when it is missing.
    init(creating directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
    }

    func write(_ name: String, _ bytes: [UInt8], secret: Bool = false) throws {
        let path = directory.appendingPathComponent(name)
        guard FileManager.default.createFile(
            atPath: path, contents: Data(bytes), attributes: secret ? [.posixPermissions: 0o600] : nil)
        else { throw TestAuthorityError(message: "\(path): cannot write") }
    }

    func read(_ name: String) throws -> [UInt8] {
        let path = directory.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TestAuthorityError(message: "\(path): cannot read (make one with `receiptd testing init-ca DIR`)")
        }
        return Array(data)
    }
}
