#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// PEM armour (RFC 7468) around DER.
package enum PEM {
    /// The decoded bodies of every `-----BEGIN label-----` block, nil where the base64 is broken.
    package static func blocks(_ bytes: [UInt8], label: String) -> [[UInt8]?] {
        var blocks: [[UInt8]?] = []
        var body: String?
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmedOfSpaces()
            if trimmed == "-----BEGIN \(label)-----" {
                body = ""
            } else if trimmed == "-----END \(label)-----", let encoded = body {
                blocks.append(Data(base64Encoded: encoded).map { Array($0) })
                body = nil
            } else if body != nil {
                body! += trimmed
            }
        }
        return blocks
    }
}
