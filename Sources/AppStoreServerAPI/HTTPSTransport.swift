internal import CCurl

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
}

/// Blocking HTTPS through libcurl, one easy handle per request: the only place that sees a libcurl type.
///
/// Certificates are always verified, against the system store plus `caFile` when given. Proxies come from the
/// environment as libcurl reads it by default (`HTTPS_PROXY`/`https_proxy`, `NO_PROXY`/`no_proxy`), since no
/// `CURLOPT_PROXY` is set.
package struct HTTPSTransport: Sendable {
    package var caFile: String?
    package var connectTimeoutSeconds: Int
    package var totalTimeoutSeconds: Int
    /// An answer larger than this is abandoned: Apple's pages hold at most 20 signed items.
    package var maximumBodyBytes: Int = 8 << 20
    /// Also http://, for `receiptd testing notification --post` to a test server; Apple is only ever reached over
    /// https.
    package var allowsPlainHTTP = false

    package init(caFile: String?, timeoutSeconds: Int) {
        self.caFile = caFile
        totalTimeoutSeconds = max(1, timeoutSeconds)
        connectTimeoutSeconds = min(totalTimeoutSeconds, 10)
    }

    package func send(_ request: OutboundRequest) -> Result<InboundResponse, TransportFailure> {
        guard CurlGlobal.initialized == CURLE_OK else {
            return .failure(TransportFailure(curlCode: Int(CurlGlobal.initialized.rawValue), message: "curl_global_init failed"))
        }
        guard let handle = EasyHandle() else { return .failure(TransportFailure(curlCode: -1, message: "curl_easy_init failed")) }
        return handle.perform(request, transport: self)
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
    var headerLines: [String] = []
    let limit: Int
    init(limit: Int) { self.limit = limit }
}

private final class EasyHandle {
    let pointer: UnsafeMutableRawPointer

    init?() {
        guard let handle = curl_easy_init() else { return nil }
        pointer = handle
    }
    deinit { curl_easy_cleanup(pointer) }

    func perform(_ request: OutboundRequest, transport: HTTPSTransport) -> Result<InboundResponse, TransportFailure> {
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
            receiptd_curl_setopt_long(pointer, CURLOPT_CONNECTTIMEOUT, transport.connectTimeoutSeconds),
            receiptd_curl_setopt_long(pointer, CURLOPT_TIMEOUT, transport.totalTimeoutSeconds),
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
        for line in headerLines.reversed() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name {
                return String(line[line.index(after: colon)...]).trimmingSpaces
            }
        }
        return nil
    }
}

extension String {
    var trimmingSpaces: String {
        let isSpace = { (character: Character) in character == " " || character == "\t" || character == "\r" || character == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
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
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) { String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self) }
    // A status line starts a new answer (after 100 Continue or through a proxy's CONNECT): forget the earlier headers.
    if line.hasPrefix("HTTP/") { reception.headerLines.removeAll() }
    reception.headerLines.append(line)
    return length
}
