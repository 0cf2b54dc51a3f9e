/// Header fields in arrival order; names compare case-insensitively (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(_ fields: [(HTTPHeaderName, String)]) {
        for (name, value) in fields { add(name: name, value: value) }
    }

    public mutating func add(name: HTTPHeaderName, value: String) { fields.append((name.rawName, value)) }

    /// Replaces every field of that name with one.
    public mutating func replaceOrAdd(name: HTTPHeaderName, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    public mutating func remove(name: HTTPHeaderName) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name.rawName) }
    }

    /// The first value of that name.
    public subscript(name: HTTPHeaderName) -> String? {
        fields.first { $0.name.equalsIgnoringASCIICase(name.rawName) }?.value
    }

    public func values(for name: HTTPHeaderName) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name.rawName) }.map(\.value)
    }

    /// Whether a field of that name lists `token` among its comma-separated elements, ignoring ASCII case
    /// (`Connection: keep-alive, Close` lists `close`), without building a string per element.
    public func contains(name: HTTPHeaderName, token: String) -> Bool {
        fields.contains { field in
            guard field.name.equalsIgnoringASCIICase(name.rawName) else { return false }
            return field.value.utf8.split(separator: UInt8(ascii: ",")).contains { element in
                var element = element
                while let first = element.first, first == .space || first == .tab { element = element.dropFirst() }
                while let last = element.last, last == .space || last == .tab { element = element.dropLast() }
                return element.elementsEqual(token.utf8) { lowercasedASCII($0) == lowercasedASCII($1) }
            }
        }
    }

    /// Whether a field has any of these names: one pass over the fields, no copy of any value.
    public func containsAny(of names: [HTTPHeaderName]) -> Bool {
        fields.contains { field in names.contains { field.name.equalsIgnoringASCIICase($0.rawName) } }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }
}

public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    public var description: String { "HTTP/\(major).\(minor)" }
}

/// A complete request as the handler sees it: the body is already read and de-chunked.
public struct HTTPRequest: Sendable, Hashable {
    public var method: HTTPMethod
    /// The request-target exactly as sent (origin-form: path and optional query).
    public var target: String {
        didSet { (path, query) = Self.split(target) }
    }
    /// The target's path, before any `?`, not percent-decoded.
    public private(set) var path: String
    /// The raw query string after `?`, if any.
    public private(set) var query: String?
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Who sent it: the accepted socket's peer.
    public var peer: HTTPPeer
    /// The socket it came in on.
    public var listener: HTTPListener

    /// `peer` and `listener` have no defaults: what a request may reach depends on both, so whoever builds one (the
    /// server, or a test) says where it came from.
    public init(
        method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], peer: HTTPPeer, listener: HTTPListener
    ) {
        self.method = method
        self.target = target
        (path, query) = Self.split(target)
        self.version = version
        self.headers = headers
        self.body = body
        self.peer = peer
        self.listener = listener
    }

    /// Split once per request: routing, logging and the handler all read the path.
    static func split(_ target: String) -> (path: String, query: String?) {
        // Searched as bytes: `String.firstIndex(of: Character)` walks grapheme clusters, which showed in profiles.
        guard let question = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (target, nil) }
        return (String(target[..<question]), String(target[target.utf8.index(after: question)...]))
    }

    /// The first value of a query parameter, percent-decoded (`+` reads as a space).
    public func queryValue(_ name: String) -> String? {
        guard let query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if percentDecode(String(parts[0])) == name {
                return parts.count > 1 ? percentDecode(String(parts[1])) : ""
            }
        }
        return nil
    }
}

/// Decodes `%XX` escapes and `+` as space, as forms encode a query; malformed escapes are kept as they are, and bytes
/// that are not UTF-8 read as U+FFFD.
public func percentDecode(_ text: String) -> String {
    // Leniently, `percentDecodedBytes` refuses nothing; the fallback only satisfies the type.
    percentDecodedBytes(text.utf8, strict: false).map { String(decoding: $0, as: UTF8.self) } ?? text
}

/// Decodes `%XX` escapes in a path segment (RFC 3986 §2.1), where `+` is itself: nil when a `%` is not followed by two
/// hex digits or the bytes decoded are not UTF-8, so that no two spellings of one segment decode alike by accident.
public func percentDecode(strict segment: some StringProtocol) -> String? {
    // Copied into an array first: the decoder then runs on concrete bytes rather than through the generic view.
    percentDecodedBytes(Array(segment.utf8), strict: true).flatMap { String(validating: $0, as: UTF8.self) }
}

/// The one percent-decoder: `strict` refuses a malformed escape (nil) and keeps `+`; otherwise a malformed escape is
/// kept as written and `+` is a space.
private func percentDecodedBytes(_ utf8: some Collection<UInt8>, strict: Bool) -> [UInt8]? {
    var out: [UInt8] = []
    out.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index < utf8.endIndex {
        let byte = utf8[index]
        index = utf8.index(after: index)
        guard byte == UInt8(ascii: "%") else {
            out.append(!strict && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            continue
        }
        let low = index < utf8.endIndex ? utf8.index(after: index) : index
        guard low < utf8.endIndex, let highValue = utf8[index].hexValue, let lowValue = utf8[low].hexValue else {
            if strict { return nil }
            out.append(byte)
            continue
        }
        out.append(highValue << 4 | lowValue)
        index = utf8.index(after: low)
    }
    return out
}

/// The remote end of a connection, as the server accepted it.
public struct HTTPPeer: Sendable, Hashable {
    /// `address:port` (`[address]:port` for IPv6), for logs.
    public var address: String
    /// 127.0.0.0/8, ::1 or an IPv4-mapped 127.x: a client on this machine (or anything this machine forwards).
    public var isLoopback: Bool

    public init(address: String, isLoopback: Bool) {
        self.address = address
        self.isLoopback = isLoopback
    }

    /// Decided on the address bytes (network order), never their text: 127.0.0.0/8, ::1, and ::ffff:127.0.0.0/104
    /// (an IPv4 client of a dual-stack socket). Anything else, IPv4-compatible `::127.x` included, is not.
    static func isLoopback(_ address: [UInt8]) -> Bool {
        switch address.count {
        case 4: return address[0] == 127
        case 16:
            let isIPv6Loopback = address[0..<15].allSatisfy { $0 == 0 } && address[15] == 1
            let isMappedIPv4Loopback =
                address[0..<10].allSatisfy { $0 == 0 } && address[10] == 0xFF && address[11] == 0xFF
                && address[12] == 127
            return isIPv6Loopback || isMappedIPv4Loopback
        default: return false
        }
    }
}

/// A listening socket, as bound.
public struct HTTPListener: Sendable, Hashable {
    /// `address:port` (`[address]:port` for IPv6) as bound: `0.0.0.0:8080` for every IPv4 address.
    public var address: String
    /// Bound to a loopback address (127.0.0.0/8, ::1), so only this machine can connect. A wildcard (`0.0.0.0`,
    /// `::`) is not: it takes connections from anywhere.
    public var isLoopback: Bool

    public init(address: String, isLoopback: Bool) {
        self.address = address
        self.isLoopback = isLoopback
    }
}

public struct HTTPResponse: Sendable, Hashable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    /// The body, sent piece after piece (none empty) and never joined: an answer of hundreds of kilobytes made mostly
    /// of texts the application keeps across requests (an account's) goes out without being copied into one buffer.
    public private(set) var bodyPieces: [ArraySlice<UInt8>]
    /// Who the application found made the request (a token's name, say), for the access log only: never sent, and
    /// never a credential.
    public var authenticatedUser: String?

    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.init(status: status, headers: headers, bodyPieces: [body[...]])
    }

    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), bodyPieces: [ArraySlice<UInt8>]) {
        self.status = status
        self.headers = headers
        self.bodyPieces = bodyPieces.filter { !$0.isEmpty }
    }

    /// The body's bytes, joined when it is in several pieces.
    public var body: [UInt8] {
        get { bodyPieces.count == 1 ? Array(bodyPieces[0]) : Array(bodyPieces.joined()) }
        set { bodyPieces = newValue.isEmpty ? [] : [newValue[...]] }
    }

    public var bodyCount: Int { bodyPieces.byteCount }

    /// Equal bodies are equal however they are cut into pieces.
    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.headers == rhs.headers && lhs.authenticatedUser == rhs.authenticatedUser
            && lhs.bodyPieces.joined().elementsEqual(rhs.bodyPieces.joined())
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(headers)
        hasher.combine(authenticatedUser)
        hasher.combine(bodyCount)
    }
}

func lowercasedASCII(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

extension String {
    /// Header names are ASCII tokens; comparing their bytes folded to lower case avoids allocating lowercased copies
    /// on every lookup (which showed at the top of the server's profile).
    ///
    /// Both sides are read from their contiguous UTF-8 when they have it (native strings always do), byte by byte
    /// with no iterator: every request looks up several headers, each compared with every field it has.
    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        let contiguous = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                for index in mine.indices where mine[index] != theirs[index] {
                    if lowercasedASCII(mine[index]) != lowercasedASCII(theirs[index]) { return false }
                }
                return true
            }
        }
        if let contiguous, let equal = contiguous { return equal }
        return zip(utf8, other.utf8).allSatisfy { lowercasedASCII($0) == lowercasedASCII($1) }
    }
}

extension [ArraySlice<UInt8>] {
    /// The bytes of every piece together: what a body in pieces holds, or sends.
    var byteCount: Int { reduce(0) { $0 + $1.count } }
}
