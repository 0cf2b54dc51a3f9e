#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTP1Server
internal import ReceiptEngine
internal import Ledger
import JSONText

/// Where log lines go: one call per complete line, without its newline. Injected, never global, so tests capture it.
public typealias LogSink = @Sendable (String) -> Void

/// receiptd's log: one line per request, one event per notification delivered and a few lifecycle events, as text
/// or JSON.
///
/// Only what operators need to see traffic and failures goes in. Receipts, device ids, passwords, shared secrets and
/// query strings never do: query strings can carry `device_id`, and a receipt identifies a customer.
public struct ServiceLog: Sendable {
    public let format: ServiceConfiguration.LogFormat
    private let sink: LogSink
    private let clock: @Sendable () -> Date

    public init(
        format: ServiceConfiguration.LogFormat, clock: @escaping @Sendable () -> Date = { Date() },
        sink: @escaping LogSink
    ) {
        self.format = format
        self.clock = clock
        self.sink = sink
    }

    /// The access-log line for one request.
    public func access(_ record: HTTPAccessRecord) {
        sink(accessLine(record))
    }

    /// A lifecycle event (startup, shutdown), with extra fields in order.
    public func event(_ message: String, _ fields: [(String, String)] = []) {
        sink(eventLine(message, fields))
    }

    /// A change of the ledger's health, logged once per change: why it cannot be used (the database's own message,
    /// passwords masked by the ledger), or that it is back.
    public func ledgerHealth(_ health: PurchaseLedger.Health) {
        switch health {
        case .available:
            event("ledger available")
        case .unavailable(let reason, let message, _):
            event("ledger unavailable", [("reason", reason.rawValue), ("message", message)])
        }
    }

    func accessLine(_ record: HTTPAccessRecord) -> String {
        let path = Self.loggedPath(record.path)
        let time = ReceiptDate(clock())
        switch format {
        case .text:
            // Bytes, not interpolation: this runs once per request and interpolation showed in the server's profile.
            var line: [UInt8] = []
            line.reserveCapacity(96 + path.utf8.count)
            time.appendRFC3339(to: &line)
            line.append(UInt8(ascii: " "))
            Self.appendPrintable(Self.clipped(record.method), to: &line)
            line.append(UInt8(ascii: " "))
            Self.appendPrintable(path, to: &line)
            line.append(UInt8(ascii: " "))
            JSONValue.writeInteger(Int64(record.status.code), into: &line)
            line.append(UInt8(ascii: " "))
            JSONValue.writeInteger(Int64(record.responseBytes), into: &line)
            line.append(contentsOf: "B ".utf8)
            JSONValue.writeInteger(Int64(record.microseconds), into: &line)
            line.append(contentsOf: "us id=".utf8)
            Self.appendPrintable(Self.clipped(record.requestID), to: &line)
            if let user = record.user {
                line.append(contentsOf: " token=".utf8)
                Self.appendPrintable(Self.clipped(user), to: &line)
            }
            return String(decoding: line, as: UTF8.self)
        case .json:
            var members: [(key: String, value: JSONValue)] = [
                ("time", .string(time.rfc3339)),
                ("method", .string(Self.clipped(record.method))),
                ("path", .string(path)),
                ("status", .integer(Int64(record.status.code))),
                ("bytes", .integer(Int64(record.responseBytes))),
                ("duration_us", .integer(Int64(record.microseconds))),
                ("request_id", .string(Self.clipped(record.requestID))),
            ]
            if let user = record.user { members.append(("token", .string(Self.clipped(user)))) }
            let value = JSONValue.object(members)
            return String(decoding: value.serialized(), as: UTF8.self)
        }
    }

    func eventLine(_ message: String, _ fields: [(String, String)]) -> String {
        let time = ReceiptDate(clock()).rfc3339
        let fields = fields.map { ($0.0, Self.clipped($0.1, toBytes: Self.maximumFieldBytes)) }
        switch format {
        case .text:
            return ([time, message] + fields.map { "\($0.0)=\(Self.quotedIfNeeded($0.1))" }).joined(separator: " ")
        case .json:
            let members: [(key: String, value: JSONValue)] =
                [("time", .string(time)), ("event", .string(message))] + fields.map { ($0.0, .string($0.1)) }
            return String(decoding: JSONValue.object(members).serialized(), as: UTF8.self)
        }
    }

    /// At most this many bytes of a value the client chose (a path, a uuid, an id) go in a line: the value is the
    /// client's to choose, the log's size is not. A 1 MB notification uuid once made a 1 MB line.
    public static let maximumClientValueBytes = 128

    /// At most this many bytes of any event field: the bound that holds for every line, whoever made the value.
    /// Database messages run to a few hundred bytes and stay whole.
    public static let maximumFieldBytes = 1024

    /// The value, or at most `limit` of its first bytes (never half a character's UTF-8) followed by `[...+NB]`, N
    /// the bytes cut, so that a reader sees it was cut.
    public static func clipped(_ value: String, toBytes limit: Int = maximumClientValueBytes) -> String {
        let utf8 = value.utf8
        let count = utf8.count
        guard count > limit else { return value }
        var end = utf8.index(utf8.startIndex, offsetBy: limit)
        // Back off continuation bytes (10xxxxxx): looking at bytes, not scalars, keeps this O(limit) for a 1 MB value.
        while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 {
            end = utf8.index(before: end)
        }
        let kept = value[..<end]
        return "\(kept)[...+\(count - utf8.distance(from: utf8.startIndex, to: end))B]"
    }

    /// The path without its query and without any account, clipped.
    static func loggedPath(_ path: String) -> String {
        clipped(pathWithoutAccount(pathWithoutQuery(path)))
    }

    /// The backend's user ids, and the app account tokens that stand for them, are never logged: an account route's
    /// path is logged with their segments replaced by their names in the route template.
    static func pathWithoutAccount(_ path: String) -> String {
        guard path.hasPrefix("/v1/accounts/") else { return path }
        var segments = path.split(separator: "/", omittingEmptySubsequences: false)
        segments[3] = "{account}"
        if segments.count > 5, segments[4] == "app_account_tokens" { segments[5] = "{app_account_token}" }
        return segments.joined(separator: "/")
    }

    /// HTTPServer hands over the path without its query already; this keeps `?device_id=` out of the log whoever
    /// makes the record.
    static func pathWithoutQuery(_ path: String) -> String {
        if let question = path.utf8.firstIndex(of: UInt8(ascii: "?")) { return String(path[..<question]) }
        return path
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Text lines split on spaces and end at newlines, so a hostile path must not forge fields or lines.
    static func appendPrintable(_ text: String, to output: inout [UInt8]) {
        for byte in text.utf8 {
            if byte <= 0x20 || byte == 0x7F || byte >= 0x80 || byte == UInt8(ascii: "%") {
                output.append(contentsOf: [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
            } else {
                output.append(byte)
            }
        }
    }

    /// A field value as logfmt writes it: bare when it has no space, quote or control character, else quoted with
    /// `\"`, `\\` and `\n` escapes, so a value can never start a new field or line.
    static func quotedIfNeeded(_ text: String) -> String {
        let needsQuotes =
            text.isEmpty
            || text.unicodeScalars.contains { $0.value <= 0x20 || $0 == "\"" || $0 == "=" || $0.value == 0x7F }
        guard needsQuotes else { return text }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// Writes each line with one `write(2)`, the caller waiting for the stream: for failures before the server runs.
    /// The server's own log goes to stdout through a `LogLineQueue`, which a stalled stdout cannot block.
    public static let standardError: LogSink = { line in writeLine(line, to: .error) }

    private static func writeLine(_ line: String, to stream: StandardStream) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(line.utf8.count + 1)
        bytes.append(contentsOf: line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        stream.write(bytes)
    }
}
