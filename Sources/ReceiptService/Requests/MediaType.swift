internal import ReceiptEngine
internal import CryptoFloor

/// A media type from a `Content-Type` or `Accept` header (RFC 9110 §8.3.1): `type/subtype` lowercased, parameters
/// with lowercased names and unquoted values.
struct MediaType: Sendable {
    var type: String
    var subtype: String
    var parameters: [(name: String, value: String)]

    var essence: String { "\(type)/\(subtype)" }

    func parameter(_ name: String) -> String? {
        parameters.first { $0.name == name }?.value
    }

    init?(_ text: String) {
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
