internal import CCurl
internal import Synchronization

/// One outbound HTTPS request: what the client asks of the transport.
package struct OutboundRequest: Sendable {
    package var method: String
    package var url: String
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]?

    package init(method: String, url: String, headers: [(name: String, value: String)], body: [UInt8]?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// An answer as it came over the wire; only the headers the client reads are kept.
package struct InboundResponse: Sendable {
    package var status: Int
    package var contentType: String?
    package var retryAfter: String?
    package var body: [UInt8]
}

/// Why a request got no HTTP answer: libcurl's code and its message (DNS, connect, TLS, timeout, too large).
package struct TransportFailure: Error, Sendable {
    package var curlCode: Int
    package var message: String

    /// Whether trying again may get an answer: a timeout, a refused or reset connection, a connection closed without
    /// an answer. A name that does not resolve or a certificate that does not verify will be the same next time.
    package var mayHeal: Bool {
        switch curlCode {
        case Int(CURLE_COULDNT_CONNECT.rawValue), Int(CURLE_OPERATION_TIMEDOUT.rawValue),
            Int(CURLE_GOT_NOTHING.rawValue), Int(CURLE_SEND_ERROR.rawValue), Int(CURLE_RECV_ERROR.rawValue),
            Int(CURLE_PARTIAL_FILE.rawValue):
            true
        default: false
        }
    }
}

/// Blocking HTTPS through libcurl: the only place that sees a libcurl type.
///
/// Easy handles are kept between requests, each used by one request at a time, so a connection to Apple (and its TLS
/// session) is reused: a sync of many pages makes one handshake. Concurrent requests take more handles; at most
/// `maximumIdleHandles` are kept once they are done.
///
/// Certificates are always verified, against the system store plus `caFile` when given. Proxies come from the
/// environment as libcurl reads it by default (`HTTPS_PROXY`/`https_proxy`, `NO_PROXY`/`no_proxy`), since no
/// `CURLOPT_PROXY` is set.
package final class HTTPSTransport: Sendable {
    package let caFile: String?
    package let connectTimeoutSeconds: Int
    package let totalTimeoutSeconds: Int
    /// An answer larger than this is abandoned: Apple's pages hold at most 20 signed items.
    package let maximumBodyBytes: Int = 8 << 20
    /// Handles (and their connections) kept once done: as many as the caller runs requests at once, so none is
    /// closed only to be opened again by the next request.
    package let maximumIdleHandles: Int
    private let idleHandles = Mutex<[EasyHandle]>([])
    private let openedConnections = Atomic<Int>(0)
    /// Also http://, for `receiptd testing notification --post` to a test server; Apple is only ever reached over
    /// https.
    package let allowsPlainHTTP: Bool

    package init(caFile: String?, timeoutSeconds: Int, allowsPlainHTTP: Bool = false, maximumIdleHandles: Int = 8) {
        self.caFile = caFile
        self.allowsPlainHTTP = allowsPlainHTTP
        self.maximumIdleHandles = maximumIdleHandles
        totalTimeoutSeconds = max(1, timeoutSeconds)
        connectTimeoutSeconds = min(totalTimeoutSeconds, 10)
    }

    /// Connections opened so far (each a TCP connect and a TLS handshake).
    package var connectionsOpened: Int { openedConnections.load(ordering: .relaxed) }

    /// - Parameter timeoutMilliseconds: a bound tighter than the transport's own for this request (what is left of a
    ///   caller's deadline).
    package func send(_ request: OutboundRequest, timeoutMilliseconds: Int? = nil) -> Result<InboundResponse, TransportFailure> {
        guard CurlGlobal.initialized == CURLE_OK else {
            return .failure(TransportFailure(curlCode: Int(CurlGlobal.initialized.rawValue), message: "curl_global_init failed"))
        }
        guard let handle = idleHandles.withLock({ $0.popLast() }) ?? EasyHandle() else {
            return .failure(TransportFailure(curlCode: -1, message: "curl_easy_init failed"))
        }
        let timeout = min(totalTimeoutSeconds * 1000, max(1, timeoutMilliseconds ?? Int.max))
        let outcome = handle.perform(request, transport: self, timeoutMilliseconds: timeout)
        openedConnections.add(handle.connectionsOfLastRequest, ordering: .relaxed)
        idleHandles.withLock { idle in
            if idle.count < maximumIdleHandles { idle.append(handle) }
        }
        return outcome
    }
}

private enum CurlGlobal {
    // libcurl wants this once per process, before any other thread uses it; a Swift global is initialized once,
    // under a lock, on first use.
    static let initialized: CURLcode = receiptd_curl_global_init()
}

/// What the callbacks fill in; reached through the opaque context pointer libcurl hands back.
private final class Reception {
    var body: [UInt8] = []
    var headerLines: [[UInt8]] = []
    let limit: Int
    init(limit: Int) { self.limit = limit }
}

/// One libcurl easy handle and the connections it caches. Sendable because it moves between threads through the
/// transport's idle list, and only ever serves the one request that took it out of the list.
private final class EasyHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    private(set) var connectionsOfLastRequest = 0

    init?() {
        guard let handle = curl_easy_init() else { return nil }
        pointer = handle
    }
    deinit { curl_easy_cleanup(pointer) }

    func perform(
        _ request: OutboundRequest, transport: HTTPSTransport, timeoutMilliseconds: Int
    ) -> Result<InboundResponse, TransportFailure> {
        // Every option back to its default (a POST body must not follow into the next GET); the connection cache, DNS
        // cache and TLS sessions stay.
        curl_easy_reset(pointer)
        connectionsOfLastRequest = 0
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            // "Name:" with nothing after the colon removes a header libcurl would add by itself.
            guard let appended = curl_slist_append(headerList, value.isEmpty ? "\(name):" : "\(name): \(value)") else {
                return .failure(TransportFailure(curlCode: -1, message: "curl_slist_append failed"))
            }
            headerList = appended
        }
        let reception = Reception(limit: transport.maximumBodyBytes)
        let context = Unmanaged.passUnretained(reception).toOpaque()
        // The callbacks reach `reception` through an unretained pointer: it must live through curl_easy_perform.
        let options: [CURLcode] = [
            receiptd_curl_setopt_string(pointer, CURLOPT_URL, request.url),
            transport.allowsPlainHTTP ? receiptd_curl_http_or_https(pointer) : receiptd_curl_https_only(pointer),
            receiptd_curl_setopt_string(pointer, CURLOPT_CUSTOMREQUEST, request.method),
            receiptd_curl_setopt_long(pointer, CURLOPT_NOSIGNAL, 1),
            receiptd_curl_setopt_long(pointer, CURLOPT_SSL_VERIFYPEER, 1),
            receiptd_curl_setopt_long(pointer, CURLOPT_SSL_VERIFYHOST, 2),
            receiptd_curl_setopt_long(
                pointer, CURLOPT_CONNECTTIMEOUT_MS, min(transport.connectTimeoutSeconds * 1000, timeoutMilliseconds)),
            receiptd_curl_setopt_long(pointer, CURLOPT_TIMEOUT_MS, timeoutMilliseconds),
            receiptd_curl_setopt_long(pointer, CURLOPT_FOLLOWLOCATION, 0),
            receiptd_curl_setopt_pointer(pointer, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList)),
            receiptd_curl_setopt_callback(pointer, CURLOPT_WRITEFUNCTION, receiveBody),
            receiptd_curl_setopt_pointer(pointer, CURLOPT_WRITEDATA, context),
            receiptd_curl_setopt_callback(pointer, CURLOPT_HEADERFUNCTION, receiveHeader),
            receiptd_curl_setopt_pointer(pointer, CURLOPT_HEADERDATA, context),
        ]
        if let failed = options.first(where: { $0 != CURLE_OK }) { return .failure(failure(failed)) }
        // CAINFO replaces libcurl's default bundle file but not its default CA directory (Debian's libcurl is built
        // with /etc/ssl/certs for both), so the system store still counts beside `caFile`.
        if let caFile = transport.caFile {
            let code = receiptd_curl_setopt_string(pointer, CURLOPT_CAINFO, caFile)
            guard code == CURLE_OK else { return .failure(failure(code)) }
        }
        if let body = request.body {
            // COPYPOSTFIELDS after the size: the body is bytes, not a C string, and libcurl keeps its own copy.
            let sized = receiptd_curl_setopt_long(pointer, CURLOPT_POSTFIELDSIZE, body.count)
            let copied = body.withUnsafeBytes { bytes in
                bytes.baseAddress.map { receiptd_curl_setopt_pointer(pointer, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0)) }
                    ?? receiptd_curl_setopt_string(pointer, CURLOPT_COPYPOSTFIELDS, "")
            }
            guard sized == CURLE_OK else { return .failure(failure(sized)) }
            guard copied == CURLE_OK else { return .failure(failure(copied)) }
        }
        let performed = withExtendedLifetime(reception) { curl_easy_perform(pointer) }
        _ = receiptd_curl_getinfo_long(pointer, CURLINFO_NUM_CONNECTS, &connectionsOfLastRequest)
        guard performed == CURLE_OK else { return .failure(failure(performed)) }
        var status = 0
        _ = receiptd_curl_getinfo_long(pointer, CURLINFO_RESPONSE_CODE, &status)
        return .success(
            InboundResponse(
                status: status, contentType: reception.header("content-type"),
                retryAfter: reception.header("retry-after"), body: reception.body))
    }

    private func failure(_ code: CURLcode) -> TransportFailure {
        TransportFailure(curlCode: Int(code.rawValue), message: String(cString: curl_easy_strerror(code)))
    }
}

extension Reception {
    /// The last value of a header: after a redirect or a 100 Continue only the final answer's headers count, and
    /// those come last.
    func header(_ name: String) -> String? {
        headerLines.reversed().lazy.compactMap { HeaderLine.value(of: name, in: $0) }.first
    }
}

/// A raw header line as libcurl hands it over, CR LF included.
package enum HeaderLine {
    /// The value of `line` when it is the header `name` (compared without case), trimmed of SP, HTAB, CR and LF
    /// (RFC 9110 §5.5). Bytes, not `Character`s: Swift reads CR LF as one `Character`, which equals neither "\r" nor
    /// "\n", so a trim by characters keeps it and `Retry-After: 7` never parses.
    package static func value(of name: String, in line: [UInt8]) -> String? {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let lowercased = line[..<colon].map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
        guard lowercased.elementsEqual(name.lowercased().utf8) else { return nil }
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var value = line[(colon + 1)...]
        while let first = value.first, isSpace(first) { value = value.dropFirst() }
        while let last = value.last, isSpace(last) { value = value.dropLast() }
        return String(decoding: value, as: UTF8.self)
    }
}

private let receiveBody: receiptd_curl_data_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let reception = Unmanaged<Reception>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    // Returning less than was given makes libcurl abort with CURLE_WRITE_ERROR.
    guard reception.body.count + length <= reception.limit else { return 0 }
    data.withMemoryRebound(to: UInt8.self, capacity: length) { reception.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length)) }
    return length
}

private let receiveHeader: receiptd_curl_data_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let reception = Unmanaged<Reception>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard reception.headerLines.count < 200 else { return 0 }
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    // A status line starts a new answer (after 100 Continue or through a proxy's CONNECT): forget the earlier headers.
    if line.starts(with: "HTTP/".utf8) { reception.headerLines.removeAll() }
    reception.headerLines.append(line)
    return length
}
