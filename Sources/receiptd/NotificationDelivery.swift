// Linux only, as the server is: the socket calls are spelled the Glibc way.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import HTTP1Server
import JSONText
import ReceiptEngine
import CryptoFloor

/// A server's answer to a delivered notification.
struct HTTPAnswer {
    var status: Int
    var body: [UInt8]
}

/// Delivers a signed notification the way the App Store does: `POST` of `{"signedPayload": "<JWS>"}` with
/// `Content-Type: application/json`.
///
/// A small HTTP/1.1 client over a blocking socket, for `http://` test servers only. FoundationNetworking would do it
/// in one call, but it links libcurl, which the runtime image (Debian slim plus libssl3) does not have.
enum NotificationDelivery {
    /// The URL cannot be delivered to (not `http://`, no host): a usage error.
    struct TargetError: Error, CustomStringConvertible {
        var description: String
    }

    /// The delivery failed on the wire: no connection, a timeout, an answer that is not HTTP.
    struct DeliveryError: Error, CustomStringConvertible {
        var description: String
    }

    /// Answers larger than this are cut off: a test server's answer to a notification is a few hundred bytes.
    static let maximumAnswerBytes = 1 << 20

    static func post(signedPayload: String, to target: String, timeoutSeconds: Int = 10) throws -> HTTPAnswer {
        guard let url = URLComponents(string: target), url.scheme?.lowercased() == "http",
            let host = url.host, !host.isEmpty
        else {
            throw TargetError(
                description: "\(target): expected an http:// URL (for https, write the notification with --out and "
                    + "POST {\"signedPayload\": \"<JWS>\"} to it with curl)")
        }
        let port = url.port ?? 80
        var path = url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath
        if let query = url.percentEncodedQuery { path += "?" + query }
        let body = JSONValue.object([("signedPayload", .string(signedPayload))]).serialized()
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let head =
            "POST \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: receiptd-testing\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"

        let descriptor = try connect(host: host, port: port, timeoutSeconds: timeoutSeconds)
        defer { close(descriptor) }
        try send(Array(head.utf8) + body, on: descriptor)
        return try parse(receiveAll(from: descriptor))
    }

    private static func connect(host: String, port: Int, timeoutSeconds: Int) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var addresses: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &addresses)
        guard status == 0, let first = addresses else {
            throw DeliveryError(description: "\(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var lastError = ECONNREFUSED
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let address = candidate {
            candidate = address.pointee.ai_next
            let descriptor = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard descriptor >= 0 else {
                lastError = errno
                continue
            }
            // On Linux the send timeout bounds connect() too; the receive timeout bounds a server that never answers.
            var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            do {
                try retryingInterrupts("connect") {
                    Glibc.connect(descriptor, address.pointee.ai_addr, address.pointee.ai_addrlen)
                }
                return descriptor
            } catch {
                lastError = error.errno
                close(descriptor)
            }
        }
        throw DeliveryError(description: "cannot connect to \(host):\(port): \(String(cString: strerror(lastError)))")
    }

    private static func send(_ bytes: [UInt8], on descriptor: Int32) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = try bytes.withUnsafeBytes { buffer in
                try retryingInterrupts("send") {
                    Glibc.send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                }
            }
            offset += sent
        }
    }

    /// Reads until the server closes the connection (the request asked it to), up to `maximumAnswerBytes`.
    private static func receiveAll(from descriptor: Int32) throws -> [UInt8] {
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while answer.count < maximumAnswerBytes {
            let count = try buffer.withUnsafeMutableBytes { raw in
                try retryingInterrupts("recv") { recv(descriptor, raw.baseAddress, raw.count, 0) }
            }
            if count == 0 { break }
            answer += buffer[..<count]
        }
        return answer
    }

    /// The status code and the body (after `Content-Length`, or de-chunked) of an HTTP/1.x answer.
    static func parse(_ answer: [UInt8]) throws -> HTTPAnswer {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let headEnd = answer.firstRange(of: separator) else {
            throw DeliveryError(description: "the server closed the connection without a complete HTTP answer")
        }
        let headLines = String(decoding: answer[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusWords = headLines[0].split(separator: " ", maxSplits: 2)
        guard statusWords.count >= 2, statusWords[0].hasPrefix("HTTP/1."), let status = Int(statusWords[1]) else {
            throw DeliveryError(description: "not an HTTP answer: \(headLines[0].prefix(80))")
        }
        var headers: [String: String] = [:]
        for line in headLines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmedOfSpaces()
        }
        var body = Array(answer[headEnd.upperBound...])
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = dechunked(body)
        } else if let length = headers["content-length"].flatMap(Int.init), length < body.count {
            body = Array(body.prefix(length))
        }
        return HTTPAnswer(status: status, body: body)
    }

    /// RFC 9112 §7.1 chunked coding, leniently: what arrived before a malformed chunk is kept.
    private static func dechunked(_ bytes: [UInt8]) -> [UInt8] {
        var body: [UInt8] = []
        var rest = bytes[...]
        let lineEnd: [UInt8] = Array("\r\n".utf8)
        while let sizeEnd = rest.firstRange(of: lineEnd) {
            let sizeText = String(decoding: rest[..<sizeEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16), size > 0,
                rest.distance(from: sizeEnd.upperBound, to: rest.endIndex) >= size
            else { break }
            let chunkEnd = rest.index(sizeEnd.upperBound, offsetBy: size)
            body += rest[sizeEnd.upperBound..<chunkEnd]
            rest = rest[chunkEnd...].dropFirst(2)
        }
        return body
    }
}

/// A failed system call, with its `errno`.
private struct SystemCallFailure: Error {
    var call: String
    var errno: Int32
}

/// HTTP1Server's `syscall` (which retries `EINTR`), its failure told as a delivery tells it: `EAGAIN` is a socket
/// timeout.
@discardableResult
private func retryingInterrupts<Value: FixedWidthInteger>(
    _ call: String, _ body: () -> Value
) throws(SystemCallFailure) -> Value {
    do {
        return try HTTP1Server.syscall(call, body)
    } catch {
        throw SystemCallFailure(call: error.call, errno: error.errno)
    }
}

extension SystemCallFailure: CustomStringConvertible {
    var description: String {
        errno == EAGAIN || errno == EWOULDBLOCK
            ? "\(call): timed out" : "\(call): \(String(cString: strerror(errno)))"
    }
}
