/// A JSON value that keeps object members in the order they were written or read.
///
/// receiptd's answers are read by people as often as by programs, so members come out in a stable, documented order;
/// Foundation's `JSONSerialization` neither keeps order nor tells integers from doubles, and is slow on the hot path.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    /// The first member of that name when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        // Lengths first: most members differ in length, and String's == compares no lengths before the bytes.
        let length = key.utf8.count
        return members.first { $0.key.utf8.count == length && $0.key == key }?.value
    }

    /// The element at that position when this is an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .integer(let value): hasher.combine(value)
        case .number(let value): hasher.combine(value)
        case .string(let value): hasher.combine(value)
        case .array(let values): hasher.combine(values)
        case .object(let members):
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        }
    }
}

extension JSONValue {
    /// `.string` or `.null`, for optional fields whose key is always present.
    package static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    package static func integer(_ value: Int64?) -> JSONValue { value.map(JSONValue.integer) ?? .null }
}

// MARK: - Serializing

extension JSONValue {
    /// UTF-8 JSON text. Compact by default; `pretty` indents by two spaces for people and `receiptd verify --json`.
    public func serialized(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        write(into: &out, pretty: pretty, depth: 0)
        if pretty { out.append(UInt8(ascii: "\n")) }
        return out
    }

    @usableFromInline func write(into out: inout [UInt8], pretty: Bool, depth: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): Self.writeInteger(value, into: &out)
        case .number(let value):
            // JSON has no NaN or infinity; null is what JavaScript's JSON.stringify writes for them.
            if value.isFinite {
                out.append(contentsOf: String(value).utf8)
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let value): Self.writeString(value, into: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.newline(into: &out, pretty: pretty, depth: depth + 1)
                value.write(into: &out, pretty: pretty, depth: depth + 1)
            }
            if !values.isEmpty { Self.newline(into: &out, pretty: pretty, depth: depth) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.newline(into: &out, pretty: pretty, depth: depth + 1)
                Self.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                member.value.write(into: &out, pretty: pretty, depth: depth + 1)
            }
            if !members.isEmpty { Self.newline(into: &out, pretty: pretty, depth: depth) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(into out: inout [UInt8], pretty: Bool, depth: Int) {
        guard pretty else { return }
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: depth * 2))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Decimal digits without making a `String` (answers hold many integers): the digits are counted, room is made,
    /// and they are filled in from the last, by the constant divisor 10 (a multiplication, where a divisor that
    /// changes per digit is a hardware divide).
    package static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        guard value >= 0 else {
            out.append(contentsOf: String(value).utf8)
            return
        }
        var rest = UInt64(value)
        guard rest >= 10 else {
            out.append(UInt8(ascii: "0") + UInt8(rest))
            return
        }
        var digits = 2
        var bound: UInt64 = 100
        // Int64.max has 19 digits; 10^19 still fits a UInt64.
        while digits < 19, rest >= bound {
            digits += 1
            bound &*= 10
        }
        var index = out.count + digits
        out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        repeat {
            index -= 1
            out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while rest > 0
    }

    /// By byte value: 1 when it is written escaped.
    private static let escapedBytes: [UInt8] = (0...255).map { needsEscape(UInt8($0)) ? 1 : 0 }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x00..<0x20, 0x7F, UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "<"), UInt8(ascii: ">"),
            UInt8(ascii: "&"):
            true
        default: false
        }
    }

    /// RFC 8259 §7: quote, backslash and control characters are escaped. `<`, `>` and `&` are escaped too, so that
    /// a receipt's strings can never close a `<script>` block if an answer is ever embedded in a page.
    package static func writeString(_ string: String, into out: inout [UInt8]) {
        var string = string
        string.withUTF8 { writeString(utf8: $0, into: &out) }
    }

    /// `writeString` of text already in UTF-8.
    package static func writeString(utf8 bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        // Nearly every string in an answer needs no escape: it is checked in place and copied whole (a memcpy); only
        // a string that needs escapes is written byte by byte.
        let needsEscape = escapedBytes.withUnsafeBufferPointer { escaped in
            var found: UInt8 = 0
            for byte in bytes { found |= escaped[Int(byte)] }
            return found != 0
        }
        out.append(UInt8(ascii: "\""))
        guard needsEscape else {
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20, 0x7F, UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "&"):
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Parsing

/// Why a JSON text could not be read, with the byte offset where reading stopped.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses RFC 8259 JSON. Nesting is capped so that hostile bodies cannot exhaust the stack; duplicate keys are
    /// kept (lookups see the first).
    public init(parsing bytes: [UInt8], maximumDepth: Int = 64) throws(JSONParseError) {
        self = try Self.parsingText(bytes, maximumDepth: maximumDepth).value
    }

    /// Parses like `init(parsing:)`, and tells whether `bytes` are exactly what `serialized()` writes for the value
    /// (compact, no escape but those it writes, integers as it writes them): then the text can be sent as it is,
    /// rather than written again from the value.
    package static func parsingText(
        _ bytes: [UInt8], maximumDepth: Int = 64
    ) throws(JSONParseError) -> (value: JSONValue, isSerialized: Bool) {
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth)
        // A UTF-8 byte order mark is not JSON, but Windows tools write one into config files.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            parser.index = 3
            parser.isSerialized = false
        }
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
        return (value, parser.isSerialized)
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    let maximumDepth: Int
    var index = 0
    /// Nothing read so far is written otherwise by `JSONValue.serialized()`.
    var isSerialized = true

    init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D:
                index += 1
                isSerialized = false
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < maximumDepth else { throw error("nested too deeply") }
        guard index < bytes.count else { throw error("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        for byte in literal.utf8 {
            guard index < bytes.count, bytes[index] == byte else { throw error("invalid literal") }
            index += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        // StoreKit payloads have dozens of members: a few growths rather than one per doubling from one.
        members.reserveCapacity(8)
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue(depth: depth + 1)))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            } else {
                throw error("expected ',' or '}'")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        index += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(values)
        }
        while true {
            skipWhitespace()
            values.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(values)
            } else {
                throw error("expected ',' or ']'")
            }
        }
    }

    /// By byte value, inside a string: 0 plain ASCII, `nonASCII` for bytes of multi-byte characters, `endsPlainRun`
    /// for the quote, the backslash and control characters, `writtenEscaped` for the others `serialized()` escapes.
    private static let stringByteClass: [UInt8] = (0...255).map { value in
        switch value {
        case 0x22, 0x5C, 0..<0x20: endsPlainRun
        case 0x80...: nonASCII
        case 0x7F, 0x3C, 0x3E, 0x26: writtenEscaped
        default: 0
        }
    }
    private static let nonASCII: UInt8 = 1
    private static let endsPlainRun: UInt8 = 2
    private static let writtenEscaped: UInt8 = 4

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        // Most strings hold no escape: find the closing quote and make the string in one go (StoreKit 2 headers carry
        // kilobytes of base64 certificates, which byte-by-byte appends made the costliest part of a parse).
        let start = index
        var scan = start
        var seen: UInt8 = 0
        bytes.withUnsafeBufferPointer { bytes in
            Self.stringByteClass.withUnsafeBufferPointer { classes in
                while scan < bytes.count {
                    let byteClass = classes[Int(bytes[scan])]
                    if byteClass == Self.endsPlainRun { break }
                    seen |= byteClass
                    scan += 1
                }
            }
        }
        let isASCII = seen & Self.nonASCII == 0
        if seen & Self.writtenEscaped != 0 { isSerialized = false }
        if scan < bytes.count, bytes[scan] == UInt8(ascii: "\"") {
            index = scan + 1
            // ASCII is valid UTF-8 as it stands; only other text needs the (generic, slower) validation.
            if isASCII { return String(decoding: bytes[start..<scan], as: UTF8.self) }
            guard let string = String(validating: bytes[start..<scan], as: UTF8.self) else { throw error("invalid UTF-8") }
            return string
        }
        var out = Array(bytes[start..<scan])
        index = scan
        // An escape or a control character (refused below) follows: written otherwise, or not at all.
        isSerialized = false
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                // Invalid UTF-8 must not pass silently into the engine or back out in an answer.
                guard let string = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8") }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): out.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by `\u` and a low one (RFC 8259 §7).
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("unpaired surrogate") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw error("invalid escape")
                }
            case 0x00..<0x20: throw error("control character in string")
            default:
                out.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case 48...57: digit = UInt32(c - 48)
            case 65...70: digit = UInt32(c - 55)
            case 97...102: digit = UInt32(c - 87)
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (48...57).contains(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, (48...57).contains(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int64(text) {
            // JSON forbids other leading zeros; -0 is written 0.
            if integer == 0, bytes[start] == UInt8(ascii: "-") { isSerialized = false }
            return .integer(integer)
        }
        isSerialized = false
        guard let double = Double(text) else { throw error("invalid number") }
        return .number(double)
    }
}
