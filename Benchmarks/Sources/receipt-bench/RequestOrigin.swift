import HTTP1Server

/// The benchmarks time receiptd's default deployment: a caller on this machine, receiptd bound to loopback.
extension HTTPPeer {
    static let benchmarkClient = HTTPPeer(address: "127.0.0.1:50000", isLoopback: true)
}

extension HTTPListener {
    static let benchmarkListener = HTTPListener(address: "127.0.0.1:8080", isLoopback: true)
}
