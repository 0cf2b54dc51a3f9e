import Foundation
public import HTTP1Server

#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client for exact bytes on the wire.
public final class RawClient {
    public let descriptor: Int32
    private var received: [UInt8] = []

    public init(port: Int, receiveTimeout: Double = 3) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ClientError("socket failed") }
        var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - receiveTimeout.rounded(.down)) * 1e6))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw ClientError("connect failed: errno \(errno)")
        }
    }

    deinit { close(descriptor) }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw ClientError("send failed: errno \(errno)") }
            offset += count
        }
    }

    /// Reads until EOF or the receive timeout; returns everything not yet consumed.
    public func readUntilClose() -> String {
        while fill() {}
        defer { received = [] }
        return String(decoding: received, as: UTF8.self)
    }

    /// True once the server closed (EOF or reset) within the receive timeout.
    public func isClosedByServer() -> Bool {
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) == 0 || errno == ECONNRESET
    }

    /// One response: head, and a body of its Content-Length.
    public func readResponse(toHEAD: Bool = false) throws -> RawResponse {
        while true {
            if let end = find(Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end], as: UTF8.self)
                let lines = head.components(separatedBy: "\r\n")
                let status = Int(lines[0].split(separator: " ")[1]) ?? 0
                var headers: [(String, String)] = []
                for line in lines.dropFirst() {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    headers.append((String(parts[0]), parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""))
                }
                let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
                let bodyStart = end + 4
                let hasBody = status >= 200 && !toHEAD
                while hasBody, received.count < bodyStart + length {
                    guard fill() else { throw ClientError("closed inside a body") }
                }
                let bodyEnd = hasBody ? bodyStart + length : bodyStart
                let response = RawResponse(status: status, statusLine: lines[0], headers: headers,
                                           body: Array(received[bodyStart..<bodyEnd]))
                received.removeFirst(bodyEnd)
                return response
            }
            guard fill() else { throw ClientError("no response; got \(String(decoding: received, as: UTF8.self).debugDescription)") }
        }
    }

    private func find(_ pattern: [UInt8]) -> Int? {
        guard received.count >= pattern.count else { return nil }
        for index in 0...(received.count - pattern.count) where received[index..<index + pattern.count].elementsEqual(pattern) {
            return index
        }
        return nil
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(descriptor, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        received.append(contentsOf: chunk[0..<count])
        return true
    }
}

public struct RawResponse {
    public var status: Int
    public var statusLine: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

public struct ClientError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs curl and returns its exit status, stdout and stderr (-v output).
public func runCurl(_ arguments: [String], maxTime seconds: Int = 5) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["--max-time", String(seconds)] + arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}

/// Collects access records for assertions.
public final class AccessLogRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [HTTPAccessRecord] = []
    private var failureRecords: [HTTPFailure] = []
    public var all: [HTTPAccessRecord] { lock.withLock { records } }
    /// What the server asked the application to word, in order.
    public var failures: [HTTPFailure] { lock.withLock { failureRecords } }
    public func record(_ record: HTTPAccessRecord) { lock.withLock { records.append(record) } }
    public func record(_ failure: HTTPFailure) { lock.withLock { failureRecords.append(failure) } }
}

/// The test handler: echoes the body; `/slow?ms=N` sleeps first; `/status?code=N` answers N.
@Sendable public func echoHandler(_ request: HTTPRequest) -> HTTPResponse {
    if request.path == "/slow" {
        usleep(UInt32(Int(request.queryValue("ms") ?? "200") ?? 200) * 1000)
    }
    var headers = HTTPHeaders([("Content-Type", "application/octet-stream"), ("X-Method", request.method.rawValue)])
    headers.add(name: "X-Path", value: request.path)
    if request.path == "/own-id" { headers.add(name: "X-Request-Id", value: "handler-chosen") }
    let status = HTTPStatus(rawValue: request.path == "/status" ? Int(request.queryValue("code") ?? "200") ?? 200 : 200)
    return HTTPResponse(status: status, headers: headers, body: request.body.isEmpty ? Array("hello \(request.path)".utf8) : request.body)
}

/// A started server on a free port, shut down when the test ends.
public final class LiveServer {
    public let server: HTTPServer
    public let port: Int
    public let log = AccessLogRecorder()

    public init(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
         handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse = echoHandler) throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configure(&configuration)
        let log = self.log
        server = HTTPServer(
            configuration: configuration, handler: handler,
            failureResponse: { failure in
                log.record(failure)
                return HTTPServer.plainTextResponse(to: failure)
            },
            accessLog: { log.record($0) })
        port = try server.start()
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    deinit {
        server.shutdown()
        server.waitUntilStopped()
    }
}

/// Polls until `condition` holds or `seconds` pass.
public func eventually(within seconds: Double = 2, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}
