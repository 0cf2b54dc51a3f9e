internal import ReceiptEngine
internal import CryptoFloor

/// A media type from a `Content-Type` or `Accept` header (RFC 9110 §8.3.1): `type/subtype` lowercased, parameters
/// with lowercased names and unquoted values.
struct MediaType: Sendable {
    var type: String
    var subtype: String
    var parameters: [(name: String, value: String)]
    /// `type/subtype`, made once: every `POST /v1/validate` switches on it.
    let essence: String

    func parameter(_ name: String) -> String? {
        parameters.first { $0.name == name }?.value
    }

    init?(_ text: String) {
        var text = text
        if let simple = text.withUTF8({ Self.simple($0) }) {
            self = simple
            return
        }
        let fields = Self.splitParameters(text)
        guard let first = fields.first else { return nil }
        let parts = first.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let type = parts[0].trimmed(of: " \t").lowercased()
        let subtype = parts[1].trimmed(of: " \t").lowercased()
        guard !type.isEmpty, !subtype.isEmpty else { return nil }
        self.type = type
        self.subtype = subtype
        self.parameters = fields.dropFirst().compactMap(Self.parameter)
        essence = type + "/" + subtype
    }

    private init(type: String, subtype: String, essence: String) {
        self.type = type
        self.subtype = subtype
        self.parameters = []
        self.essence = essence
    }

    /// `type/subtype` in ASCII with no parameter and no quote, as clients send `Content-Type`, read from its bytes
    /// in one pass; nil for anything else, which the general reading above handles. For such text both readings
    /// agree: the general one splits on `;` and quotes only, and trims and lowercases ASCII as this does.
    private static func simple(_ text: UnsafeBufferPointer<UInt8>) -> MediaType? {
        var slash: Int?
        for (index, byte) in text.enumerated() {
            guard byte < 0x80, byte != UInt8(ascii: ";"), byte != UInt8(ascii: "\"") else { return nil }
            if byte == UInt8(ascii: "/"), slash == nil { slash = index }
        }
        guard let slash else { return nil }
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        func trimmed(_ range: Range<Int>) -> Range<Int> {
            var (start, end) = (range.lowerBound, range.upperBound)
            while start < end, isBlank(text[start]) { start += 1 }
            while end > start, isBlank(text[end - 1]) { end -= 1 }
            return start..<end
        }
        let type = trimmed(0..<slash)
        let subtype = trimmed(slash + 1..<text.count)
        guard !type.isEmpty, !subtype.isEmpty else { return nil }
        var essence: [UInt8] = []
        essence.reserveCapacity(type.count + 1 + subtype.count)
        for index in type { essence.append(lowercase(text[index])) }
        essence.append(UInt8(ascii: "/"))
        for index in subtype { essence.append(lowercase(text[index])) }
        return MediaType(
            type: String(decoding: essence[..<type.count], as: UTF8.self),
            subtype: String(decoding: essence[(type.count + 1)...], as: UTF8.self),
            essence: String(decoding: essence, as: UTF8.self))
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    /// `name=value` or `name="quoted \" value"`.
    static func parameter(_ field: String) -> (name: String, value: String)? {
        guard let equals = field.firstIndex(of: "=") else { return nil }
        let name = field[..<equals].trimmed(of: " \t").lowercased()
        var value = field[field.index(after: equals)...].trimmed(of: " \t")
        if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
            var unescaped = ""
            var escaping = false
            for character in value.dropFirst().dropLast() {
                if escaping {
                    unescaped.append(character)
                    escaping = false
                } else if character == "\\" {
                    escaping = true
                } else {
                    unescaped.append(character)
                }
            }
            value = unescaped
        }
        guard !name.isEmpty else { return nil }
        return (name, value)
    }

    /// Splits on `;` outside quoted strings.
    static func splitParameters(_ text: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var inQuotes = false
        var escaping = false
        for character in text {
            if escaping {
                current.append(character)
                escaping = false
                continue
            }
            switch character {
            case "\\" where inQuotes:
                current.append(character)
                escaping = true
            case "\"":
                inQuotes.toggle()
                current.append(character)
            case ";" where !inQuotes:
                fields.append(current)
                current = ""
            default:
                current.append(character)
            }
        }
        fields.append(current)
        return fields.map { $0.trimmed(of: " \t") }.filter { !$0.isEmpty }
    }
}

/// What an `Accept` header asks for, enough to tell a browser from an API client.
struct AcceptHeader: Sendable {
    private var ranges: [(type: String, subtype: String, quality: Double)] = []

    init(_ header: String?) {
        guard let header else { return }
        for element in header.split(separator: ",") {
            guard let media = MediaType(String(element)) else { continue }
            let quality = media.parameter("q").flatMap(Double.init) ?? 1
            ranges.append((media.type, media.subtype, quality))
        }
    }

    /// The weight given to a media type by its most specific matching range (RFC 9110 §12.5.1); no header accepts
    /// everything.
    func quality(of type: String, _ subtype: String) -> Double {
        guard !ranges.isEmpty else { return 1 }
        var best: (specificity: Int, quality: Double) = (-1, 0)
        for range in ranges {
            let specificity: Int
            if range.type == type && range.subtype == subtype {
                specificity = 2
            } else if range.type == type && range.subtype == "*" {
                specificity = 1
            } else if range.type == "*" && range.subtype == "*" {
                specificity = 0
            } else {
                continue
            }
            if specificity > best.specificity { best = (specificity, range.quality) }
        }
        return best.quality
    }

    /// True only when HTML is strictly preferred to JSON: a browser's `text/html,…,*/*;q=0.8` is, curl's `*/*` and
    /// an absent header are not, so programs keep getting JSON.
    var prefersHTML: Bool {
        quality(of: "text", "html") > quality(of: "application", "json")
    }
}
