internal import ReceiptEngine
internal import CryptoFloor

/// A `multipart/form-data` body (RFC 7578, framing from RFC 2046 §5.1.1), as `curl -F` and HTML forms send it.
///
/// Parsing is bounded: part headers are capped and so is the number of parts, because a form for one receipt never
/// needs more and every part costs a scan of the body.
struct MultipartFormData: Sendable {
    struct Part: Sendable {
        var name: String?
        var filename: String?
        var contentType: String?
        var content: ArraySlice<UInt8>
    }

    /// Why a body is not acceptable multipart; the message goes back to the client in a 400.
    struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
        var detail: RequestProblem.Detail
        var description: String
        init(_ detail: RequestProblem.Detail, _ description: String) {
            self.detail = detail
            self.description = description
        }
    }

    static let maximumPartHeaderBytes = 8 * 1024
    static let maximumParts = 16

    var parts: [Part]

    /// The first part of that field name.
    func part(named name: String) -> Part? { parts.first { $0.name == name } }

    init(body: [UInt8], boundary: String) throws(FormatError) {
        // RFC 2046 §5.1.1: 1 to 70 characters.
        guard !boundary.isEmpty, boundary.utf8.count <= 70 else { throw FormatError(.invalidBoundary, "invalid multipart boundary") }
        let dashBoundary = Array("--\(boundary)".utf8)
        let delimiter = [0x0D, 0x0A] + dashBoundary

        // The first boundary may open the body or follow a preamble that ends in CRLF.
        var position: Int
        if body.starts(with: dashBoundary) {
            position = dashBoundary.count
        } else if let found = Self.search(delimiter, in: body, from: 0) {
            position = found + delimiter.count
        } else {
            throw FormatError(.noBoundaryLine, "multipart body has no boundary line")
        }

        var parts: [Part] = []
        while true {
            if Self.matches([UInt8(ascii: "-"), UInt8(ascii: "-")], in: body, at: position) { break }
            // Transport padding (linear whitespace) may follow a boundary before its CRLF.
            while position < body.count, body[position] == 0x20 || body[position] == 0x09 { position += 1 }
            if Self.matches([0x0D, 0x0A], in: body, at: position) {
                position += 2
            } else if Self.matches([0x0A], in: body, at: position) {
                position += 1
            } else {
                throw FormatError(.multipartUnterminated, "multipart body is unterminated (no closing boundary)")
            }
            guard parts.count < Self.maximumParts else {
                throw FormatError(.tooManyParts, "multipart body has more than \(Self.maximumParts) parts")
            }

            let headerLimit = min(body.count, position + Self.maximumPartHeaderBytes + 4)
            guard let headerEnd = Self.search([0x0D, 0x0A, 0x0D, 0x0A], in: body[..<headerLimit], from: position) else {
                if body.count - position > Self.maximumPartHeaderBytes {
                    throw FormatError(.partHeadersTooLarge, "multipart part headers exceed \(Self.maximumPartHeaderBytes) bytes")
                }
                throw FormatError(.partHeadersUnterminated, "multipart part headers are unterminated")
            }
            var part = try Self.parseHeaders(body[position..<headerEnd])
            let contentStart = headerEnd + 4
            guard let contentEnd = Self.search(delimiter, in: body, from: contentStart) else {
                throw FormatError(.multipartUnterminated, "multipart part is unterminated (no closing boundary)")
            }
            part.content = body[contentStart..<contentEnd]
            parts.append(part)
            position = contentEnd + delimiter.count
        }
        self.parts = parts
    }

    private static func parseHeaders(_ bytes: ArraySlice<UInt8>) throws(FormatError) -> Part {
        var part = Part(content: [])
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else {
                throw FormatError(.partHeaderWithoutColon, "multipart part header without a colon")
            }
            let name = line[..<colon].trimmed(of: " \t").lowercased()
            let value = line[line.index(after: colon)...].trimmed(of: " \t")
            switch name {
            case "content-disposition":
                for field in MediaType.splitParameters(value).dropFirst() {
                    guard let parameter = MediaType.parameter(field) else { continue }
                    if parameter.name == "name" { part.name = parameter.value }
                    if parameter.name == "filename" { part.filename = parameter.value }
                }
            case "content-type":
                part.contentType = value
            default:
                continue
            }
        }
        return part
    }

    private static func matches(_ pattern: [UInt8], in body: [UInt8], at position: Int) -> Bool {
        guard position + pattern.count <= body.count else { return false }
        for offset in 0..<pattern.count where body[position + offset] != pattern[offset] { return false }
        return true
    }

    /// The first index at or after `start` where `pattern` occurs. Linear for these patterns: they begin with CR and
    /// hold no other CR, so a failed comparison never overlaps the next candidate.
    static func search(_ pattern: [UInt8], in body: ArraySlice<UInt8>, from start: Int) -> Int? {
        guard let first = pattern.first, body.count >= pattern.count else { return nil }
        var index = max(start, body.startIndex)
        let last = body.endIndex - pattern.count
        while index <= last {
            if body[index] == first {
                var offset = 1
                while offset < pattern.count, body[index + offset] == pattern[offset] { offset += 1 }
                if offset == pattern.count { return index }
            }
            index += 1
        }
        return nil
    }

    static func search(_ pattern: [UInt8], in body: [UInt8], from start: Int) -> Int? {
        search(pattern, in: body[...], from: start)
    }
}
