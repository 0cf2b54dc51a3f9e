import Dispatch

internal import Glibc

/// One client connection: moves bytes between the socket, the decoder and the handler, nothing else.
///
/// Every stored property is confined to `loop`'s thread (an event loop shared by several connections), which is
/// what makes the `@unchecked Sendable` sound: closures that leave the loop (the handler) only capture values and
/// come back with `loop.execute`.
final class HTTPConnection: @unchecked Sendable {
    let descriptor: Int32
    let peer: HTTPPeer
    let loop: EventLoop
    /// Accepted over `maxConnections`: answers 503 and closes, and does not count as open.
    let isRejected: Bool

    private let server: HTTPServer
    private var decoder: HTTPRequestDecoder
    /// What the loop watches the socket for right now.
    private var isRegistered = false
    private var watchesReadable = false
    private var watchesWritable = false

    /// Responses in request order: a pipelined request's response waits for every earlier one.
    private var slots: [Slot] = []
    private var firstSlotSequence = 0
    /// Pieces of responses (heads and bodies' pieces, none empty), sent together but never copied together. Those
    /// before `sentPieces` are out (and emptied, so that their storage is freed); dropping each from the front as it
    /// went would move every piece behind it.
    private var output: [ArraySlice<UInt8>] = []
    private var sentPieces = 0
    private var pendingOutputBytes = 0

    /// False once a request asked to close, a request was refused, the client half-closed, or shutdown began.
    private var isAcceptingRequests = true
    private var isInputClosed = false
    private var isShuttingDown = false
    private var isLingering = false
    private var isClosed = false

    private var headStartedAt: DispatchTime?
    private var bodyStartedAt: DispatchTime?
    private var idleSince = DispatchTime.now()
    private var lastWriteProgress = DispatchTime.now()
    private var lingerDeadline = DispatchTime.now()

    private enum Slot {
        case waiting
        case ready(head: [UInt8], body: [ArraySlice<UInt8>], closeAfter: Bool)
    }

    /// Requests handled at once for one pipelining client; beyond it the connection stops reading.
    private static let maxPipelinedRequests = 16
    /// Unsent response bytes beyond which the connection stops reading (a client that sends but never reads).
    private static let maxPendingOutputBytes = 1 << 20
    private static let readChunkBytes = 64 * 1024
    /// How long a closing connection keeps draining what the client still sends, so that closing with unread
    /// data (which makes the kernel send RST) does not destroy the final response before the client reads it.
    private static let lingerSeconds = 2.0

    init(
        descriptor: Int32, peer: HTTPPeer, listener: HTTPListener, loop: EventLoop, server: HTTPServer,
        isRejected: Bool
    ) {
        self.descriptor = descriptor
        self.peer = peer
        self.loop = loop
        self.server = server
        self.isRejected = isRejected
        self.decoder = HTTPRequestDecoder(
            peer: peer, listener: listener, maxHeaderBytes: server.configuration.maxHeaderBytes,
            maxBodyBytes: server.configuration.maxBodyBytes
        )
    }

    /// Starts reading; call once, on any thread.
    func start() {
        loop.execute { self.startOnLoop() }
    }

    private func startOnLoop() {
        do {
            try loop.register(self)
        } catch {
            isClosed = true
            closeDescriptor(descriptor)
            server.connectionClosed(self)
            return
        }
        isRegistered = true
        watchesReadable = true
        if isRejected {
            refuse(HTTPFailure(status: .serviceUnavailable, message: "too many connections"), method: nil, target: nil)
        }
        update()
    }

    /// What the loop saw on the socket.
    func handle(_ event: PollEvent) {
        // Hang-up or error: the peer reset or both directions are shut, so nothing more can be delivered; and a
        // level-triggered hang-up would be reported again on every wait.
        if event.isFailed {
            close()
            return
        }
        if event.isReadable { readable() }
        if event.isWritable, !isClosed { write() }
    }

    // MARK: - Reading

    private func readable() {
        guard !isClosed else { return }
        var received = 0
        var sawEndOfInput = false
        // A few reads per event keep one busy client from starving the others on this loop.
        for _ in 0..<4 {
            // Allocated per read, not per connection: idle connections then hold no buffer at all.
            let result: IOResult<[UInt8]>
            do {
                result = try Socket.read(descriptor, maximum: Self.readChunkBytes)
            } catch {
                sawEndOfInput = true
                break
            }
            guard case .processed(let chunk) = result else { break }
            guard !chunk.isEmpty else {
                sawEndOfInput = true
                break
            }
            received += chunk.count
            if !isLingering { decoder.feed(chunk) }
            if chunk.count < Self.readChunkBytes { break }
        }
        if received > 0, headStartedAt == nil, !isLingering { headStartedAt = .now() }
        if sawEndOfInput {
            isInputClosed = true
            // A read error or EOF ends input; what was decoded before still gets its responses.
            if isLingering {
                close()
                return
            }
        }
        process()
    }

    /// Turns buffered bytes into requests while the connection may take more.
    private func process() {
        while isAcceptingRequests, !isClosed, slots.count < Self.maxPipelinedRequests {
            switch decoder.next() {
            case .needMoreData:
                if isInputClosed {
                    // Whatever part of a request is buffered can never complete.
                    isAcceptingRequests = false
                    if slots.isEmpty, pendingOutputBytes == 0, !isLingering {
                        close()
                        return
                    }
                }
                update()
                return
            case .bodyExpected(_, let expectsContinue):
                headStartedAt = nil
                bodyStartedAt = .now()
                if expectsContinue {
                    slots.append(.ready(head: HTTPResponseEncoder.continueResponse, body: [], closeAfter: false))
                }
                flush()
            case .request(let request):
                headStartedAt = decoder.bufferedByteCount > 0 ? .now() : nil
                bodyStartedAt = nil
                dispatch(request)
            case .failure(let error):
                let line = decoder.currentRequestLine
                refuse(
                    HTTPFailure(status: error.status, message: error.message), method: line?.method, target: line?.target)
            }
        }
        update()
    }

    private func dispatch(_ request: HTTPRequest) {
        let sequence = firstSlotSequence + slots.count
        slots.append(.waiting)
        if !request.wantsKeepAlive { isAcceptingRequests = false }
        let server = self.server
        let peer = self.peer
        let started = DispatchTime.now()
        let respond: @Sendable (_ handler: @Sendable (HTTPRequest) -> HTTPResponse) -> (
            head: [UInt8], body: [ArraySlice<UInt8>], closes: Bool
        ) = {
            handler in
            var response = handler(request)
            let requestID = response.headers[.requestID] ?? makeRequestID()
            response.headers.replaceOrAdd(name: .requestID, value: requestID)
            let closes =
                !request.wantsKeepAlive || server.isStopping || response.headers.contains(name: .connection, token: "close")
            let persistence: HTTPResponseEncoder.Persistence =
                closes ? .close : request.version == .http1_0 ? .keepAliveEchoed : .keepAlive
            let (head, body) = HTTPResponseEncoder.encode(
                response, headOnly: request.method == .head, persistence: persistence)
            server.log(
                method: request.method.rawValue, path: request.path, status: response.status,
                bytes: head.count + body.byteCount, started: started, requestID: requestID, peer: peer.address,
                user: response.authenticatedUser
            )
            return (head, body, closes)
        }
        let finish: @Sendable (_ handler: @Sendable (HTTPRequest) -> HTTPResponse) -> Void = { handler in
            let (head, body, closes) = respond(handler)
            self.loop.execute { self.responseReady(sequence: sequence, head: head, body: body, closeAfter: closes) }
        }
        if let lane = server.configuration.waitingLanes.first(where: { $0.accepts(request) }) {
            let handler = server.handler
            if !lane.threads.tryRun({ finish(handler) }) {
                server.handlerQueue.async { finish(lane.busyHandler) }
            }
        } else if let limit = server.configuration.inlineHandlingMaxBodyBytes, request.body.count <= limit,
            server.configuration.mayHandleInline?(request) ?? true
        {
            let (head, body, closes) = respond(server.handler)
            slots[sequence - firstSlotSequence] = .ready(head: head, body: body, closeAfter: closes)
            flush()  // the caller, `process()`, goes on with any request pipelined behind this one
        } else {
            let handler = server.handler
            server.handlerQueue.async { finish(handler) }
        }
    }

    /// Queues a response the server makes itself, after which the connection closes.
    private func refuse(_ failure: HTTPFailure, method: String?, target: String?) {
        isAcceptingRequests = false
        var response = server.failureResponse(failure)
        let requestID = makeRequestID()
        response.headers.replaceOrAdd(name: .requestID, value: requestID)
        let (head, body) = HTTPResponseEncoder.encode(response, headOnly: method == "HEAD", persistence: .close)
        server.log(
            method: method ?? "-", path: target.map { HTTPRequest.split($0).path } ?? "-", status: response.status,
            bytes: head.count + body.byteCount,
            started: .now(), requestID: requestID, peer: peer.address
        )
        slots.append(.ready(head: head, body: body, closeAfter: true))
        flush()
    }

    private func responseReady(sequence: Int, head: [UInt8], body: [ArraySlice<UInt8>], closeAfter: Bool) {
        let index = sequence - firstSlotSequence
        guard !isClosed, slots.indices.contains(index) else { return }
        slots[index] = .ready(head: head, body: body, closeAfter: closeAfter)
        flush()
        process()
    }

    // MARK: - Writing

    /// Moves every ready response at the head of the line into the output, then writes.
    private func flush() {
        while case .ready(let head, let body, let closeAfter) = slots.first {
            slots.removeFirst()
            firstSlotSequence += 1
            for piece in [head[...]] + body where !piece.isEmpty {
                output.append(piece)
                pendingOutputBytes += piece.count
            }
            if closeAfter {
                isAcceptingRequests = false
                firstSlotSequence += slots.count
                slots.removeAll()
                isLingering = true
                break
            }
        }
        write()
    }

    private func write() {
        guard !isClosed else { return }
        while pendingOutputBytes > 0 {
            let result: IOResult<Int>
            do {
                result = try Socket.send(descriptor, output[sentPieces...])
            } catch {
                close()
                return
            }
            switch result {
            case .processed(var count):
                pendingOutputBytes -= count
                lastWriteProgress = .now()
                while count > 0 {
                    let unsent = output[sentPieces].count
                    guard count >= unsent else {
                        output[sentPieces] = output[sentPieces].dropFirst(count)
                        break
                    }
                    count -= unsent
                    output[sentPieces] = []
                    sentPieces += 1
                }
                if sentPieces == output.count {
                    output.removeAll(keepingCapacity: true)
                    sentPieces = 0
                } else if sentPieces >= 64, sentPieces * 2 >= output.count {
                    // A pipelining client that never lets the output drain: dropped in bulk, once per half.
                    output.removeFirst(sentPieces)
                    sentPieces = 0
                }
            case .wouldBlock:
                update()
                return
            }
        }
        if isLingering {
            beginLinger()
        } else if slots.isEmpty, isShuttingDown || (isInputClosed && !isAcceptingRequests) {
            close()
        } else {
            if slots.isEmpty { idleSince = .now() }
            update()
        }
    }

    /// The final response is out: stop sending, drain what the client still sends for a moment, then close.
    private func beginLinger() {
        guard !isInputClosed, !isShuttingDown else {
            close()
            return
        }
        _ = shutdown(descriptor, Int32(SHUT_WR))
        lingerDeadline = .now() + Self.lingerSeconds
        update()
    }

    // MARK: - Timeouts and read interest

    /// Brings what the loop watches for in line with the current state (deadlines are checked by the loop's sweep).
    private func update() {
        guard !isClosed, isRegistered else { return }
        let pendingOutput = pendingOutputBytes
        // Not after end of input either: a level-triggered end of input would be reported on every wait.
        let wantsInput =
            !isInputClosed
            && (isLingering
                || (isAcceptingRequests && slots.count < Self.maxPipelinedRequests
                    && pendingOutput < Self.maxPendingOutputBytes))
        let wantsOutput = pendingOutput > 0
        guard wantsInput != watchesReadable || wantsOutput != watchesWritable else { return }
        do {
            try loop.setInterest(self, readable: wantsInput, writable: wantsOutput)
            watchesReadable = wantsInput
            watchesWritable = wantsOutput
        } catch {
            close()
        }
    }

    private enum Phase {
        case lingering, writing, handling, readingBody, readingHead, idle, finishing
    }

    private var phase: Phase {
        if isLingering { return pendingOutputBytes > 0 ? .writing : .lingering }
        if pendingOutputBytes > 0 { return .writing }
        if !slots.isEmpty { return .handling }
        if !isAcceptingRequests { return .finishing }
        if bodyStartedAt != nil { return .readingBody }
        if headStartedAt != nil || decoder.bufferedByteCount > 0 || !decoder.isAtMessageBoundary { return .readingHead }
        return .idle
    }

    private func currentDeadline() -> DispatchTime? {
        let configuration = server.configuration
        switch phase {
        case .lingering: return lingerDeadline
        case .writing: return lastWriteProgress + configuration.idleTimeout
        case .handling: return nil
        case .finishing: return idleSince + configuration.idleTimeout
        case .readingBody: return (bodyStartedAt ?? .now()) + configuration.bodyReadTimeout
        case .readingHead: return (headStartedAt ?? .now()) + configuration.headerReadTimeout
        case .idle: return idleSince + configuration.idleTimeout
        }
    }

    /// Called by the loop a few times a second.
    func checkDeadline() {
        guard !isClosed, let deadline = currentDeadline(), deadline <= .now() else { return }
        switch phase {
        case .readingHead, .readingBody:
            let line = decoder.currentRequestLine
            refuse(
                HTTPFailure(status: .requestTimeout, message: "request not received in time"), method: line?.method,
                target: line?.target)
        case .lingering, .writing, .idle, .handling, .finishing:
            close()
        }
    }

    // MARK: - Shutdown and close

    /// Server shutdown: idle connections close now; in-flight requests finish and their responses go out first.
    func beginShutdown() {
        loop.execute {
            guard !self.isClosed else { return }
            self.isShuttingDown = true
            self.isAcceptingRequests = false
            if self.slots.isEmpty, self.pendingOutputBytes == 0 {
                self.close()
            } else {
                self.update()
            }
        }
    }

    /// The grace period is over.
    func forceClose() {
        loop.execute { self.close() }
    }

    private func close() {
        guard !isClosed else { return }
        isClosed = true
        if isRegistered { loop.deregister(self) }
        closeDescriptor(descriptor)
        slots.removeAll()
        output = []
        sentPieces = 0
        pendingOutputBytes = 0
        server.connectionClosed(self)
    }
}

extension HTTPRequest {
    /// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`.
    var wantsKeepAlive: Bool {
        if headers.contains(name: .connection, token: "close") { return false }
        return version == .http1_1 || headers.contains(name: .connection, token: "keep-alive")
    }
}

/// 16 hex digits from the kernel's CSPRNG: an id must not let one client predict another's (a counter mixed with a
/// key could be, once a few ids are seen).
func makeRequestID() -> String {
    let value = RandomBytes.shared.nextUInt64()
    var text: [UInt8] = []
    text.reserveCapacity(16)
    for shift in stride(from: 60, through: 0, by: -4) { text.append(requestIDDigits[Int(value >> UInt64(shift) & 0xF)]) }
    return String(decoding: text, as: UTF8.self)
}

private let requestIDDigits = Array("0123456789abcdef".utf8)
