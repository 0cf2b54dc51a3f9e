/// Why a request could not be decoded, and the status the server answers with before closing.
public struct HTTPRequestDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status to answer with: 400, 413, 431, 501 or 505.
    public var status: HTTPStatus
    /// A short, stable explanation safe to show the client (no echo of request bytes).
    public var message: String

    public init(status: HTTPStatus, message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { "\(status): \(message)" }

    static func badRequest(_ message: String) -> Self { Self(status: 400, message: message) }
    static func headerTooLarge() -> Self { Self(status: 431, message: "request line and headers are too large") }
    static func payloadTooLarge() -> Self { Self(status: 413, message: "request body is too large") }
}

/// How the body of a request whose head is complete will be framed.
public enum HTTPBodyFraming: Sendable, Hashable {
    case contentLength(Int)
    case chunked
}

/// An incremental HTTP/1.x request decoder (RFC 9112), a pure function of the bytes fed to it.
///
/// Feed bytes as they arrive and call `next()` until it answers `.needMoreData`. Feeding a message whole or
/// one byte at a time yields the same sequence of events. It is strict on purpose: anything two parsers could
/// frame differently (request smuggling) is an error, and after an error the decoder stays failed.
public struct HTTPRequestDecoder: Sendable {
    public enum Event: Sendable, Hashable {
        /// The buffered bytes hold no complete event yet.
        case needMoreData
        /// A head is complete and a non-empty body follows; `expectsContinue` means the client waits for
        /// `100 Continue` before sending it (RFC 9110 §10.1.1). Not reported for requests without a body.
        case bodyExpected(HTTPBodyFraming, expectsContinue: Bool)
        /// A complete request, body de-chunked.
        case request(HTTPRequest)
        /// The bytes are not an acceptable request; answer `status` and close the connection.
        case failure(HTTPRequestDecodingError)
    }

    public var maxHeaderBytes: Int
    public var maxBodyBytes: Int

    // Longest chunk-size line (with extensions) accepted; real clients send a few bytes.
    private static let maxChunkLineBytes = 4096
    // A declared length is a promise, not bytes: reserving all of it up front let idle clients that declare large
    // bodies exhaust address space and abort the process. Beyond this, the body grows as bytes arrive.
    private static let maxBodyReservation = 64 * 1024

    private enum State: Sendable {
        case requestLine
        case headerLines
        case body(remaining: Int)
        case chunkSizeLine
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailerLines
        case failed(HTTPRequestDecodingError)
    }

    private var buffer: [UInt8] = []
    /// Index of the first byte not yet consumed.
    private var readIndex = 0
    /// Where the search for the current line's LF resumes, so each byte is scanned once.
    private var scanIndex = 0
    private var state: State = .requestLine
    /// Bytes of the current head (or trailer section) consumed so far, against `maxHeaderBytes`.
    private var headBytes = 0

    private var method = ""
    private var target = ""
    private var version = HTTPVersion.http1_1
    private var headers = HTTPHeaders()
    private var body: [UInt8] = []

    /// Every request decoded is stamped with these: a decoder reads one connection.
    public let peer: HTTPPeer
    public let listener: HTTPListener

    public init(
        peer: HTTPPeer, listener: HTTPListener, maxHeaderBytes: Int = 16 * 1024, maxBodyBytes: Int = 4 * 1024 * 1024
    ) {
        self.peer = peer
        self.listener = listener
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Bytes buffered but not yet part of an emitted event.
    public var bufferedByteCount: Int { buffer.count - readIndex }

    /// True between requests: nothing of a next request has been consumed (leading CRLFs aside).
    public var isAtMessageBoundary: Bool {
        if case .requestLine = state { return true }
        return false
    }

    /// Method and target of the request being decoded, once its request line is read (for access logs).
    public var currentRequestLine: (method: String, target: String)? {
        switch state {
        case .requestLine, .failed: return method.isEmpty ? nil : (method, target)
        default: return (method, target)
        }
    }

    public mutating func feed<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        // Compact lazily so byte-at-a-time feeding stays linear.
        if readIndex > 4096, readIndex * 2 > buffer.count {
            buffer.removeFirst(readIndex)
            scanIndex = max(scanIndex - readIndex, 0)
            readIndex = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func next() -> Event {
        while true {
            switch state {
            case .failed(let error):
                return .failure(error)

            case .requestLine:
                // RFC 9112 §2.2: ignore at least one empty line before a request line.
                if readIndex < buffer.count, buffer[readIndex] == .cr || buffer[readIndex] == .lf {
                    if buffer[readIndex] == .lf { return fail(.badRequest("bare LF line ending")) }
                    guard readIndex + 1 < buffer.count else { return .needMoreData }
                    guard buffer[readIndex + 1] == .lf else { return fail(.badRequest("bare CR in request")) }
                    readIndex += 2
                    scanIndex = readIndex
                    continue
                }
                method = ""
                switch nextLine(limit: maxHeaderBytes, tooLong: .headerTooLarge()) {
                case .needMore: return .needMoreData
                case .failure(let error): return fail(error)
                case .line(let line):
                    headBytes = line.count + 2
                    if let error = parseRequestLine(line) { return fail(error) }
                    headers = HTTPHeaders()
                    body = []
                    state = .headerLines
                }

            case .headerLines:
                switch nextLine(limit: maxHeaderBytes - headBytes, tooLong: .headerTooLarge()) {
                case .needMore: return .needMoreData
                case .failure(let error): return fail(error)
                case .line(let line):
                    headBytes += line.count + 2
                    if line.isEmpty {
                        if let event = headComplete() { return event }
                    } else {
                        switch parseField(line) {
                        case .success(let field): headers.add(name: HTTPHeaderName(field.name), value: field.value)
                        case .failure(let error): return fail(error)
                        }
                    }
                }

            case .body(let remaining):
                let left = takeBodyBytes(remaining)
                if left > 0 {
                    state = .body(remaining: left)
                    return .needMoreData
                }
                return completeRequest()

            case .chunkSizeLine:
                switch nextLine(limit: Self.maxChunkLineBytes, tooLong: .badRequest("chunk size line is too long")) {
                case .needMore: return .needMoreData
                case .failure(let error): return fail(error)
                case .line(let line):
                    switch parseChunkSize(line) {
                    case .failure(let error): return fail(error)
                    case .success(0):
                        headBytes = 0
                        state = .trailerLines
                    case .success(let size):
                        guard size <= maxBodyBytes - body.count else { return fail(.payloadTooLarge()) }
                        body.reserveCapacity(body.count + min(size, Self.maxBodyReservation))
                        state = .chunkData(remaining: size)
                    }
                }

            case .chunkData(let remaining):
                let left = takeBodyBytes(remaining)
                if left > 0 {
                    state = .chunkData(remaining: left)
                    return .needMoreData
                }
                state = .chunkDataEnd

            case .chunkDataEnd:
                guard buffer.count - readIndex >= 2 else {
                    if readIndex < buffer.count, buffer[readIndex] != .cr {
                        return fail(.badRequest("chunk data not followed by CRLF"))
                    }
                    return .needMoreData
                }
                guard buffer[readIndex] == .cr, buffer[readIndex + 1] == .lf else {
                    return fail(.badRequest("chunk data not followed by CRLF"))
                }
                readIndex += 2
                scanIndex = readIndex
                state = .chunkSizeLine

            case .trailerLines:
                // Trailers are validated like header fields, then dropped: nothing here may change framing.
                switch nextLine(limit: maxHeaderBytes - headBytes, tooLong: .headerTooLarge()) {
                case .needMore: return .needMoreData
                case .failure(let error): return fail(error)
                case .line(let line):
                    headBytes += line.count + 2
                    if line.isEmpty { return completeRequest() }
                    if case .failure(let error) = parseField(line) { return fail(error) }
                }
            }
        }
    }

    // MARK: - Lines

    private enum LineResult {
        case line(ArraySlice<UInt8>)
        case needMore
        case failure(HTTPRequestDecodingError)
    }

    /// The next CRLF-terminated line (without CRLF). `limit` counts the line with its CRLF; the same verdict
    /// comes whether the line arrives whole or in pieces, because a line that will exceed it is refused as soon
    /// as the buffered part does.
    private mutating func nextLine(limit: Int, tooLong: HTTPRequestDecodingError) -> LineResult {
        var index = max(scanIndex, readIndex)
        while index < buffer.count, buffer[index] != .lf { index += 1 }
        guard index < buffer.count else {
            scanIndex = index
            return buffer.count - readIndex > limit ? .failure(tooLong) : .needMore
        }
        let lineLength = index + 1 - readIndex
        if lineLength > limit { return .failure(tooLong) }
        // RFC 9112 §2.2 allows a bare LF as a terminator; accepting it is how smuggling starts, so refuse it.
        guard index > readIndex, buffer[index - 1] == .cr else { return .failure(.badRequest("bare LF line ending")) }
        let line = buffer[readIndex..<(index - 1)]
        readIndex = index + 1
        scanIndex = readIndex
        return .line(line)
    }

    // MARK: - Head

    private mutating func parseRequestLine(_ line: ArraySlice<UInt8>) -> HTTPRequestDecodingError? {
        // Exactly two single spaces, three non-empty parts (RFC 9112 §3).
        guard let firstSpace = line.firstIndex(of: .space),
            let secondSpace = line[(firstSpace + 1)...].firstIndex(of: .space),
            !line[(secondSpace + 1)...].contains(.space)
        else {
            return .badRequest("malformed request line")
        }
        let methodBytes = line[..<firstSpace], targetBytes = line[(firstSpace + 1)..<secondSpace]
        let versionBytes = line[(secondSpace + 1)...]
        guard !methodBytes.isEmpty, !targetBytes.isEmpty, !versionBytes.isEmpty else {
            return .badRequest("malformed request line")
        }
        guard methodBytes.allSatisfy(\.isTokenCharacter) else { return .badRequest("invalid method") }
        // Only origin-form: this server is nobody's proxy, and `*` (OPTIONS) has nothing to describe here.
        guard targetBytes.first == UInt8(ascii: "/"), targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .badRequest("invalid request target")
        }
        let v = versionBytes.startIndex
        guard versionBytes.count == 8, versionBytes.starts(with: "HTTP/".utf8), versionBytes[v + 6] == UInt8(ascii: "."),
            versionBytes[v + 5].isDigit, versionBytes[v + 7].isDigit
        else {
            return .badRequest("malformed HTTP version")
        }
        let parsed = HTTPVersion(major: Int(versionBytes[v + 5] - 48), minor: Int(versionBytes[v + 7] - 48))
        guard parsed == .http1_1 || parsed == .http1_0 else {
            return HTTPRequestDecodingError(status: 505, message: "only HTTP/1.0 and HTTP/1.1 are supported")
        }
        method = String(decoding: methodBytes, as: UTF8.self)
        target = String(decoding: targetBytes, as: UTF8.self)
        version = parsed
        return nil
    }

    private func parseField(_ line: ArraySlice<UInt8>) -> Result<(name: String, value: String), HTTPRequestDecodingError> {
        // RFC 9112 §5.2: obs-fold is refused rather than unfolded.
        if line.first == .space || line.first == .tab { return .failure(.badRequest("obsolete line folding")) }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            return .failure(.badRequest("header line without colon"))
        }
        let name = line[line.startIndex..<colon]
        // A space before the colon is a smuggling vector (RFC 9112 §5.1): the name must be a bare token.
        guard !name.isEmpty, name.allSatisfy(\.isTokenCharacter) else {
            return .failure(.badRequest("invalid header name"))
        }
        var value = line[(colon + 1)...]
        while let first = value.first, first == .space || first == .tab { value = value.dropFirst() }
        while let last = value.last, last == .space || last == .tab { value = value.dropLast() }
        // field-value: VCHAR, obs-text, SP and HTAB inside; any other control byte (CR, NUL, DEL…) is refused.
        guard value.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7F) }) else {
            return .failure(.badRequest("invalid character in header value"))
        }
        return .success((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    /// Decides the body framing once the head is complete (RFC 9112 §6). Returns the event to report, if any.
    private mutating func headComplete() -> Event? {
        // One pass over the fields: most requests carry none of the framing headers, and this runs per request.
        var hostCount = 0
        var transferEncodings: [String] = []
        var contentLengths: [String] = []
        var expectsContinue = false
        for (name, value) in headers {
            switch name.utf8.count {
            case 4 where name.equalsIgnoringASCIICase("host"): hostCount += 1
            case 6 where name.equalsIgnoringASCIICase("expect"):
                expectsContinue = expectsContinue || value.equalsIgnoringASCIICase("100-continue")
            case 14 where name.equalsIgnoringASCIICase("content-length"): contentLengths.append(value)
            case 17 where name.equalsIgnoringASCIICase("transfer-encoding"): transferEncodings.append(value)
            default: break
            }
        }
        if hostCount > 1 || (version == .http1_1 && hostCount == 0) {
            return fail(.badRequest(hostCount == 0 ? "missing Host header" : "repeated Host header"))
        }
        let framing: HTTPBodyFraming
        if !transferEncodings.isEmpty {
            if !contentLengths.isEmpty {
                return fail(.badRequest("both Content-Length and Transfer-Encoding"))
            }
            // A 1.0 client cannot mean chunked; an intermediary may have framed it by length (RFC 9112 §6.1).
            if version == .http1_0 { return fail(.badRequest("Transfer-Encoding in an HTTP/1.0 request")) }
            let codings = transferEncodings.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
                .map { $0.trimmingSpacesAndTabs().lowercased() }
            guard codings.last == "chunked", codings.filter({ $0 == "chunked" }).count == 1 else {
                return fail(.badRequest("chunked must be the final transfer coding, once"))
            }
            guard codings.count == 1 else {
                return fail(HTTPRequestDecodingError(status: 501, message: "transfer codings other than chunked"))
            }
            framing = .chunked
        } else if !contentLengths.isEmpty {
            // Even identical repeats are refused: two parsers must never be able to disagree on the length.
            guard contentLengths.count == 1, let length = Self.parseContentLength(contentLengths[0]) else {
                return fail(.badRequest("invalid Content-Length"))
            }
            guard length <= maxBodyBytes else { return fail(.payloadTooLarge()) }
            framing = .contentLength(length)
        } else {
            framing = .contentLength(0)
        }

        expectsContinue = expectsContinue && version == .http1_1
        switch framing {
        case .contentLength(0):
            return completeRequest()
        case .contentLength(let length):
            body.reserveCapacity(min(length, Self.maxBodyReservation))
            state = .body(remaining: length)
        case .chunked:
            state = .chunkSizeLine
        }
        return .bodyExpected(framing, expectsContinue: expectsContinue)
    }

    private static func parseContentLength(_ text: String) -> Int? {
        let digits = Array(text.utf8)
        // 18 digits cannot overflow Int64; nobody sends a longer body to this server.
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isDigit) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 48) }
    }

    // MARK: - Chunks

    private func parseChunkSize(_ line: ArraySlice<UInt8>) -> Result<Int, HTTPRequestDecodingError> {
        var size = 0
        var digits = 0
        var index = line.startIndex
        while index < line.endIndex, let value = line[index].hexValue {
            // 15 hex digits stay below 2^60: no overflow, and far beyond any accepted body.
            digits += 1
            guard digits <= 15 else { return .failure(.badRequest("chunk size is too large")) }
            size = size << 4 | Int(value)
            index += 1
        }
        guard digits > 0 else { return .failure(.badRequest("invalid chunk size")) }
        // chunk-ext: BWS ";" name [= value]; extensions are ignored but must not hide control bytes.
        let rest = line[index...]
        if let first = rest.first {
            guard first == UInt8(ascii: ";") || first == .space || first == .tab,
                rest.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7F) })
            else {
                return .failure(.badRequest("invalid chunk extension"))
            }
        }
        return .success(size)
    }

    // MARK: - Outcomes

    /// Moves up to `remaining` buffered bytes into the body; returns how many are still to come.
    private mutating func takeBodyBytes(_ remaining: Int) -> Int {
        let available = min(remaining, buffer.count - readIndex)
        if available > 0 {
            body.append(contentsOf: buffer[readIndex..<readIndex + available])
            readIndex += available
            scanIndex = readIndex
        }
        return remaining - available
    }

    private mutating func completeRequest() -> Event {
        let request = HTTPRequest(
            method: HTTPMethod(rawValue: method), target: target, version: version, headers: headers, body: body,
            peer: peer, listener: listener)
        state = .requestLine
        method = ""
        headers = HTTPHeaders()
        body = []
        headBytes = 0
        return .request(request)
    }

    private mutating func fail(_ error: HTTPRequestDecodingError) -> Event {
        state = .failed(error)
        return .failure(error)
    }
}

extension UInt8 {
    static let cr = UInt8(ascii: "\r")
    static let lf = UInt8(ascii: "\n")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")

    var isDigit: Bool { self >= 48 && self <= 57 }

    var hexValue: UInt8? {
        switch self {
        case 48...57: return self - 48
        case 65...70: return self - 55
        case 97...102: return self - 87
        default: return nil
        }
    }

    /// tchar (RFC 9110 §5.6.2).
    var isTokenCharacter: Bool {
        switch self {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), 48...57: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }
}

extension StringProtocol {
    func trimmingSpacesAndTabs() -> Substring {
        var result = Substring(self)
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
