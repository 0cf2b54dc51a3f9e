public import Ledger

/// When a delivery that got no 2xx is tried again (issue 25): 10 s × 2^attempts, ±20 % jitter so that the deliveries
/// of a receiver that was down do not all come back in the same second, at most an hour apart, for 72 hours after the
/// event was written; then it is `failed` (kept, shown, replayable).
public struct WebhookRetrySchedule: Sendable, Hashable {
    /// The pause after the first failed try, in milliseconds.
    public var first: Int64 = 10_000
    /// The longest pause between tries, in milliseconds.
    public var longest: Int64 = 3_600_000
    /// How long after `created_at` tries go on, in milliseconds.
    public var window: Int64 = 72 * 3_600_000
    /// The share of each pause drawn at random on either side of it.
    public var jitter = 0.2

    public init() {}

    /// - Parameters:
    ///   - attempts: tries made before the one that just failed.
    ///   - random: a value in `0..<1` (injected, so that tests know the schedule).
    public func pause(afterAttempts attempts: Int, random: Double) -> Int64 {
        // 2^attempts passes `longest` long before it could overflow; the exponent is bounded first.
        let doublings = min(max(attempts, 0), 40)
        let base = Double(first) * Double(sign: .plus, exponent: doublings, significand: 1)
        let spread = 1 - jitter + 2 * jitter * min(max(random, 0), 1)
        return max(0, min(Int64((base * spread).rounded()), longest))
    }

    /// What to record for a try of a delivery that failed at `now` (`status` when the receiver answered, `error`
    /// saying why in a few words): the next try within the window, or `failed` once the window is over. The last
    /// try falls on the window's end itself.
    public func result(
        afterAttempts attempts: Int, createdAt: Int64, now: Int64, status: Int?, error: String, random: Double
    ) -> DeliveryResult {
        let end = createdAt + window
        guard now < end else { return .failed(status: status, error: error) }
        return .retry(at: min(now + pause(afterAttempts: attempts, random: random), end), status: status, error: error)
    }
}
