internal import Dispatch
internal import Synchronization

/// Wakes a background worker now rather than at its next poll: a request stored work for it (a claim queued calls to
/// Apple, a backend answered a refund question). Made before the worker starts; nudging one that never started does
/// nothing. Any number of nudges while the worker is busy fold into one wake-up: it reads everything due when it wakes.
public final class WorkerNudge: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let isPending = Atomic<Bool>(false)

    public init() {}

    public func nudge() {
        if !isPending.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    /// Returns at a nudge or after `seconds`; a nudge that comes while the caller works is kept for the next wait.
    func wait(seconds: Double) {
        _ = semaphore.wait(timeout: .now() + max(0, seconds))
        isPending.store(false, ordering: .releasing)
    }
}
