import Foundation
import TestSupport
import Testing

@testable import ReceiptEngine
import ReceiptForge

/// Uploads that are not receipts get `malformed_receipt` with a reason naming what they are.
struct MalformedInputTests {
    /// Short, printable names: the bytes themselves would make the test log unreadable.
    struct Upload: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        var testDescription: String { name }
    }

    static let uploads: [(Upload, ValidationError.Reason)] = [
        (Upload(name: "PNG screenshot", bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 7, count: 64)),
         .notAReceiptFile),
        (Upload(name: "HEIC photo", bytes: [0, 0, 0, 0x18] + Array("ftypheic".utf8) + Array(repeating: 1, count: 32)),
         .notAReceiptFile),
        (Upload(name: "PDF", bytes: Array("%PDF-1.7\n".utf8) + Array(repeating: 0xE2, count: 32)), .notAReceiptFile),
        (Upload(name: "saved JSON request", bytes: Array("\n {\"receipt-data\": \"MIIT…\", \"password\": \"x\"}".utf8)),
         .json),
        (Upload(name: "certificate PEM", bytes: Array("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".utf8)),
         .pem),
        (Upload(name: "log text", bytes: Array("2026-11-23 receipt upload failed for user 42, see ticket".utf8)), .text),
    ]

    @Test(arguments: uploads)
    func notAReceipt_isMalformedWithAReasonNamingWhatItIs(upload: Upload, reason: ValidationError.Reason) {
        let error = TestPKI.validator().validate(upload.bytes).error
        #expect(error?.code == .malformedReceipt)
        #expect(error?.reason == reason)
    }

    @Test func receiptCutShort_isTruncatedWithTheBytesPresentAndNeeded() throws {
        let receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        let error = TestPKI.validator().validate(Array(receipt.prefix(receipt.count / 2))).error
        #expect(error?.code == .malformedReceipt)
        #expect(error?.reason == .truncated)
        #expect(error?.message.contains("\(receipt.count / 2) of the \(receipt.count) bytes") == true)
    }

    @Test func damagedReceipt_keepsTheStructuralReason() throws {
        var receipt = try TestPKI.blueprint().forge(with: TestPKI.standard)
        receipt[receipt.count - 40] ^= 0xFF
        let error = TestPKI.validator().validate(receipt + [0]).error
        #expect(error?.code == .malformedReceipt)
        #expect(error?.reason == nil)
    }
}
