public import HTTP1Server

/// Where a request built in a test comes from. `HTTPRequest` has no default peer or listener, so each test names
/// one of these (or its own) and says what it assumes about the caller.
extension HTTPPeer {
    /// A client on this machine.
    public static let loopbackClient = HTTPPeer(address: "127.0.0.1:50000", isLoopback: true)
    /// A client elsewhere (TEST-NET-3).
    public static let remoteClient = HTTPPeer(address: "203.0.113.7:40000", isLoopback: false)
}

extension HTTPListener {
    /// receiptd's default `host`: only this machine can connect.
    public static let loopback = HTTPListener(address: "127.0.0.1:8080", isLoopback: true)
    /// `host: 0.0.0.0`: anyone can connect.
    public static let wildcard = HTTPListener(address: "0.0.0.0:8080", isLoopback: false)
}
