internal import CryptoFloor

/// What bytes that are not a PKCS#7 receipt look like, so the error tells a person what they sent and what to send.
///
/// Support staff upload whatever they were given: screenshots, a saved JSON request, a certificate, text copied from
/// a log, a receipt cut short by a truncated copy. "bad ASN.1 header" helps none of them.
public enum MalformedInput {
    /// What the bytes look like, or nil when they look like a (damaged) receipt.
    public static func diagnosis(of bytes: [UInt8]) -> ValidationError? {
        func error(_ reason: ValidationError.Reason, _ message: String) -> ValidationError {
            ValidationError(.malformedReceipt, message, reason: reason)
        }
        if let format = imageOrDocument(bytes) {
            return error(.notAReceiptFile, "this is \(format), not a receipt: send the receipt file itself (the contents of the app's "
                + "appStoreReceiptURL) or its base64")
        }
        let text = bytes.drop { $0.isASCIIWhitespace || [0xEF, 0xBB, 0xBF].contains($0) }
        if text.first == UInt8(ascii: "{") {
            return error(.json, "this is JSON, not a receipt: send the base64 receipt itself, or post the JSON with its receipt "
                + "under \"receipt\" (or \"receipt-data\" to /verifyReceipt)")
        }
        if isPEM(text) {
            return error(.pem, "this is PEM text (-----BEGIN …-----), not a receipt: a certificate or key belongs in the config's "
                + "trusted_roots, not here")
        }
        if let shortfall = truncation(bytes) {
            return error(.truncated, "the receipt is cut short: \(shortfall.present) of the \(shortfall.needed) bytes its header "
                + "announces are present (was the file or the base64 copied whole?)")
        }
        if bytes.count >= 16, bytes.prefix(4096).allSatisfy({ $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 >= 0x20 }) {
            return error(.text, "this is text, not a receipt: receipts are binary (DER) or the base64 of it")
        }
        return nil
    }

    /// PEM text (`-----BEGIN …-----`). Its dashes and letters are all base64url, so without this test a PEM file
    /// would be decoded as base64 and reported as a damaged receipt instead of as PEM.
    public static func isPEM<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        bytes.drop { $0.isASCIIWhitespace || [0xEF, 0xBB, 0xBF].contains($0) }.starts(with: "-----BEGIN".utf8)
    }

    private static func imageOrDocument(_ bytes: [UInt8]) -> String? {
        let signatures: [(magic: [UInt8], name: String)] = [
            ([0x89, 0x50, 0x4E, 0x47], "a PNG image"), ([0xFF, 0xD8, 0xFF], "a JPEG image"),
            (Array("GIF8".utf8), "a GIF image"), (Array("%PDF".utf8), "a PDF document"),
            ([0x50, 0x4B, 0x03, 0x04], "a ZIP archive"), ([0x1F, 0x8B], "a gzip file"),
        ]
        if let match = signatures.first(where: { bytes.starts(with: $0.magic) }) { return match.name }
        // HEIC/HEIF (iPhone screenshots and photos): an ISO-BMFF "ftyp" box at offset 4.
        if bytes.count > 12, bytes[4..<8].elementsEqual("ftyp".utf8) { return "an image (HEIC)" }
        return nil
    }

    /// A DER SEQUENCE header whose definite length runs past the end of the bytes.
    private static func truncation(_ bytes: [UInt8]) -> (present: Int, needed: Int)? {
        guard bytes.count >= 2, bytes[0] == 0x30 else { return nil }
        let first = Int(bytes[1])
        var length = 0
        var header = 2
        if first < 0x80 {
            length = first
        } else {
            let count = first & 0x7F
            guard (1...4).contains(count), bytes.count >= 2 + count else { return nil }
            for byte in bytes[2..<(2 + count)] { length = length << 8 | Int(byte) }
            header += count
        }
        let needed = header + length
        return needed > bytes.count ? (bytes.count, needed) : nil
    }
}
