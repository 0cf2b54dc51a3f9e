import Dispatch
import Synchronization

internal import Glibc

/// One client connection: moves bytes between the socket, the decoder and the handler, nothing else.
///
/// Every stored property is confined to `queue` (a serial I/O queue shared by several connections), which is what
/// makes the `@unchecked Sendable` sound: closures that leave the queue (the handler) only capture values and
/// come back with `queue.async`.
final class HTTPConnection: @unchecked Sendable {
    let descriptor: Int32
    let peer: String
    let queue: DispatchQueue
    /// Accepted over `maxConnections`: answers 503 and closes, and does not count as open.
    let isRejected: Bool

    private let server: HTTPServer
    private var decoder: HTTPRequestDecoder
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private let timer: any DispatchSourceTimer
    private var isReadSuspended = false
    private var isWriteSourceRunning = false
    private var pendingCancellations = 0

    /// Responses in request order: a pipelined request's response waits for every earlier one.
    private var slots: [Slot] = []
    private var firstSlotSequence = 0
    private var output: [UInt8] = []
    private var outputOffset = 0

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
    private var scheduledDeadline: DispatchTime?

    private enum Slot {
        case waiting
        case ready([UInt8], closeAfter: Bool)
    }

    /// Requests handled at once for one pipelining client; beyond it the connection stops reading.
    private static let maxPipelinedRequests = 16
    /// Unsent response bytes beyond which the connection stops reading (a client that sends but never reads).
    private static let maxPendingOutputBytes = 1 << 20
    private static let readChunkBytes = 64 * 1024
    /// How long a closing connection keeps draining what the client still sends, so that closing with unread
    /// data (which makes the kernel send RST) does not destroy the final response before the client reads it.
    private static let lingerSeconds = 2.0

    init(descriptor: Int32, peer: String, queue: DispatchQueue, server: HTTPServer, isRejected: Bool) {
        self.descriptor = descriptor
        self.peer = peer
        self.queue = queue
        self.server = server
        self.isRejected = isRejected
        self.decoder = HTTPRequestDecoder(
            maxHeaderBytes: server.configuration.maxHeaderBytes,
            maxBodyBytes: server.configuration.maxBodyBytes
        )
        self.timer = DispatchSource.makeTimerSource(queue: queue)
    }

    /// Starts reading; call once, on any thread.
    func start() {
        queue.async { self.startOnQueue() }
    }

    private func startOnQueue() {
        let readSource = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        readSource.setEventHandler { [unowned self] in self.readable() }
        readSource.setCancelHandler { [self] in self.sourceCancelled() }
        self.readSource = readSource
        pendingCancellations += 1
        timer.setEventHandler { [unowned self] in self.timerFired() }
        timer.setCancelHandler { [self] in self.sourceCancelled() }
        pendingCancellations += 1
        timer.activate()
        readSource.activate()
        if isRejected {
            refuse(.serverError(status: 503, message: "too many connections"), method: nil, target: nil)
        }
        update()
    }

    // MARK: - Reading

    private func readable() {
        guard !isClosed else { return }
        var received = 0
        var sawEndOfInput = false
        // A few reads per event keep one busy client from starving the others on this queue.
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
                    if slots.isEmpty, output.count == outputOffset, !isLingering {
                        close()
                        return
                    }
                }
                update()
                return
            case .bodyExpected(_, let expectsContinue):
                headStartedAt = nil
                bodyStartedAt = .now()
                if expectsContinue { slots.append(.ready(HTTPResponseEncoder.continueResponse, closeAfter: false)) }
                flush()
            case .request(let request):
                headStartedAt = decoder.bufferedByteCount > 0 ? .now() : nil
                bodyStartedAt = nil
                dispatch(request)
            case .failure(let error):
                let line = decoder.currentRequestLine
                refuse(.serverError(status: error.status, message: error.message), method: line?.method, target: line?.target)
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
        let respond: @Sendable () -> (bytes: [UInt8], closes: Bool) = {
            var response = server.handler(request)
            let requestID = response.headers["x-request-id"] ?? makeRequestID()
            response.headers.replaceOrAdd(name: "X-Request-Id", value: requestID)
            let closes =
                !request.wantsKeepAlive || server.isStopping || response.headers.contains(name: "connection", token: "close")
            let persistence: HTTPResponseEncoder.Persistence =
                closes ? .close : request.version == .http1_0 ? .keepAliveEchoed : .keepAlive
            let bytes = HTTPResponseEncoder.encode(response, headOnly: request.method == "HEAD", persistence: persistence)
            server.log(
                method: request.method, target: request.target, status: response.status, bytes: bytes.count,
                started: started, requestID: requestID, peer: peer
            )
            return (bytes, closes)
        }
        if let limit = server.configuration.inlineHandlingMaxBodyBytes, request.body.count <= limit {
            let (bytes, closes) = respond()
            slots[sequence - firstSlotSequence] = .ready(bytes, closeAfter: closes)
            flush()  // the caller, `process()`, goes on with any request pipelined behind this one
        } else {
            server.handlerQueue.async {
                let (bytes, closes) = respond()
                self.queue.async { self.responseReady(sequence: sequence, bytes: bytes, closeAfter: closes) }
            }
        }
    }

    /// Queues a response the server makes itself, after which the connection closes.
    private func refuse(_ response: HTTPResponse, method: String?, target: String?) {
        isAcceptingRequests = false
        var response = response
        let requestID = makeRequestID()
        response.headers.replaceOrAdd(name: "X-Request-Id", value: requestID)
        let bytes = HTTPResponseEncoder.encode(response, headOnly: method == "HEAD", persistence: .close)
        server.log(
            method: method ?? "-", target: target ?? "-", status: response.status, bytes: bytes.count,
            started: .now(), requestID: requestID, peer: peer
        )
        slots.append(.ready(bytes, closeAfter: true))
        flush()
    }

    private func responseReady(sequence: Int, bytes: [UInt8], closeAfter: Bool) {
        let index = sequence - firstSlotSequence
        guard !isClosed, slots.indices.contains(index) else { return }
        slots[index] = .ready(bytes, closeAfter: closeAfter)
        flush()
        process()
    }

    // MARK: - Writing

    /// Moves every ready response at the head of the line into the output, then writes.
    private func flush() {
        while case .ready(let bytes, let closeAfter) = slots.first {
            slots.removeFirst()
            firstSlotSequence += 1
            output.append(contentsOf: bytes)
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
        while outputOffset < output.count {
            let result: IOResult<Int>
            do {
                result = try Socket.send(descriptor, output, from: outputOffset)
            } catch {
                close()
                return
            }
            switch result {
            case .processed(let count):
                outputOffset += count
                lastWriteProgress = .now()
            case .wouldBlock:
                resumeWriteSource()
                update()
                return
            }
        }
        output.removeAll(keepingCapacity: output.count <= Self.readChunkBytes)
        outputOffset = 0
        suspendWriteSource()
        if isLingering {
            beginLinger()
        } else if slots.isEmpty, isShuttingDown || (isInputClosed && !isAcceptingRequests) {
            close()
        } else {
            if slots.isEmpty { idleSince = .now() }
            update()
        }
    }

    private func resumeWriteSource() {
        if writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
            source.setEventHandler { [unowned self] in self.write() }
            source.setCancelHandler { [self] in self.sourceCancelled() }
            pendingCancellations += 1
            writeSource = source
            isWriteSourceRunning = true
            source.activate()
        } else if !isWriteSourceRunning {
            isWriteSourceRunning = true
            writeSource?.resume()
        }
    }

    private func suspendWriteSource() {
        if isWriteSourceRunning, let writeSource {
            isWriteSourceRunning = false
            writeSource.suspend()
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

    /// Brings read interest and the timer in line with the current state.
    private func update() {
        guard !isClosed else { return }
        let pendingOutput = output.count - outputOffset
        let wantsInput =
            !isInputClosed
            && (isLingering
                || (isAcceptingRequests && slots.count < Self.maxPipelinedRequests
                    && pendingOutput < Self.maxPendingOutputBytes))
        if wantsInput, isReadSuspended {
            isReadSuspended = false
            readSource?.resume()
        } else if !wantsInput, !isReadSuspended, !isInputClosed {
            isReadSuspended = true
            readSource?.suspend()
        }
        if isInputClosed, let readSource, !readSource.isCancelled {
            // At EOF a level-triggered read source would fire forever.
            if isReadSuspended {
                isReadSuspended = false
                readSource.resume()
            }
            readSource.cancel()
        }
        let deadline = currentDeadline()
        if deadline != scheduledDeadline {
            scheduledDeadline = deadline
            timer.schedule(deadline: deadline ?? .distantFuture, leeway: .milliseconds(10))
        }
    }

    private enum Phase {
        case lingering, writing, handling, readingBody, readingHead, idle, finishing
    }

    private var phase: Phase {
        if isLingering { return output.count > outputOffset ? .writing : .lingering }
        if output.count > outputOffset { return .writing }
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

    private func timerFired() {
        guard !isClosed, let deadline = currentDeadline(), deadline <= .now() else { return }
        switch phase {
        case .readingHead, .readingBody:
            let line = decoder.currentRequestLine
            refuse(.serverError(status: 408, message: "request not received in time"), method: line?.method, target: line?.target)
        case .lingering, .writing, .idle, .handling, .finishing:
            close()
        }
    }

    // MARK: - Shutdown and close

    /// Server shutdown: idle connections close now; in-flight requests finish and their responses go out first.
    func beginShutdown() {
        queue.async {
            guard !self.isClosed else { return }
            self.isShuttingDown = true
            self.isAcceptingRequests = false
            if self.slots.isEmpty, self.output.count == self.outputOffset {
                self.close()
            } else {
                self.update()
            }
        }
    }

    /// The grace period is over.
    func forceClose() {
        queue.async { self.close() }
    }

    private func close() {
        guard !isClosed else { return }
        isClosed = true
        timer.cancel()
        if let readSource, !readSource.isCancelled {
            // A suspended source never runs its cancel handler, and releasing one traps.
            if isReadSuspended { readSource.resume() }
            readSource.cancel()
        }
        if let writeSource {
            if !isWriteSourceRunning { writeSource.resume() }
            writeSource.cancel()
        }
        slots.removeAll()
        output = []
    }

    /// The descriptor may only be closed once no source watches it any more.
    private func sourceCancelled() {
        pendingCancellations -= 1
        guard pendingCancellations == 0, isClosed else { return }
        readSource = nil
        writeSource = nil
        closeDescriptor(descriptor)
        server.connectionClosed(self)
    }
}

extension HTTPRequest {
    /// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`.
    var wantsKeepAlive: Bool {
        if headers.contains(name: "connection", token: "close") { return false }
        return version == .http1_1 || headers.contains(name: "connection", token: "keep-alive")
    }
}

/// 16 hex digits, unique within the process and unguessable across processes: a counter mixed with a per-process
/// random key by a bijection (SplitMix64's finalizer), so requests do not each pay for a `getrandom` system call.
func makeRequestID() -> String {
    var value = requestIDKey &+ requestIDCounter.add(1, ordering: .relaxed).newValue &* 0x9E37_79B9_7F4A_7C15
    value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
    value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
    value ^= value >> 31
    let hexDigits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(16)
    for shift in stride(from: 60, through: 0, by: -4) { text.append(hexDigits[Int(value >> UInt64(shift) & 0xF)]) }
    return String(decoding: text, as: UTF8.self)
}

private let requestIDKey = UInt64.random(in: .min ... .max)
private let requestIDCounter = Atomic<UInt64>(0)
