import Foundation
import TestSupport
import Testing

@testable import HTTP1Server

/// The peer a handler sees, and request ids that no client can predict.
struct PeerAndRequestIDTests {
    @Test func handler_seesALoopbackPeer_overIPv4AndMappedIPv4() throws {
        for host in ["127.0.0.1", "::"] {
            let server = try LiveServer({ $0.host = host }) { request in
                HTTPResponse(status: 200, body: Array("\(request.peer.isLoopback) \(request.peer.address)".utf8))
            }
            let answer = try runCurl(["-s", "http://127.0.0.1:\(server.port)/"])
            #expect(answer.stdout.hasPrefix("true "), "\(host): \(answer.stdout)")
            #expect(answer.stdout.contains("127.0.0.1]:") || answer.stdout.contains("127.0.0.1:"))
        }
    }

    @Test(arguments: [
        ([127, 0, 0, 1], true), ([127, 255, 3, 4], true), ([128, 0, 0, 1], false), ([10, 0, 0, 1], false),
        ([0, 0, 0, 0], false), ([UInt8](repeating: 0, count: 15) + [1], true),
        ([UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 9], true),
        ([UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 10, 0, 0, 1], false),
        ([UInt8](repeating: 0, count: 12) + [127, 0, 0, 1], false), ([UInt8](repeating: 0, count: 16), false),
        ([0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1], false), ([UInt8](repeating: 0, count: 14) + [1, 1], false),
    ] as [([UInt8], Bool)])
    func loopback_isDecidedOnTheAddressBytes(address: [UInt8], isLoopback: Bool) {
        #expect(HTTPPeer.isLoopback(address) == isLoopback)
    }

    /// Bound to a wildcard, the listener is not loopback even for a loopback client: anyone else could connect.
    @Test(arguments: [("127.0.0.1", true), ("::1", true), ("0.0.0.0", false), ("::", false)])
    func handler_seesTheListenerAsBound(host: String, isLoopback: Bool) throws {
        let server = try LiveServer({ $0.host = host }) { request in
            HTTPResponse(status: 200, body: Array("\(request.listener.isLoopback) \(request.listener.address)".utf8))
        }
        let url = host.contains(":") ? "http://[::1]:\(server.port)/" : "http://127.0.0.1:\(server.port)/"
        let answer = try runCurl(["-s", url])
        #expect(answer.stdout.hasPrefix("\(isLoopback) "), "\(host): \(answer.stdout)")
        #expect(answer.stdout.hasSuffix(":\(server.port)"), "\(host): \(answer.stdout)")
    }

    @Test func requestIDs_are16HexDigits_andDistinct_acrossRefills() {
        let ids = (0..<5_000).map { _ in makeRequestID() }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.utf8.count == 16 && $0.utf8.allSatisfy { Array("0123456789abcdef".utf8).contains($0) } })
    }
}
