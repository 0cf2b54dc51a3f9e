import Synchronization

/// Answers of `GET /v1/accounts/{account}` as last written, without their `at`: a backend asks "may user 42 use Pro
/// now?" again and again, and the answer only changes when the ledger does or when the clock passes one of the
/// account's dates (an expiry, a grace period's end…).
///
/// An answer is given again only when both still hold:
/// - the ledger's ``PurchaseLedger/MemoryStamp`` is the one taken before its facts were read (no write of this
///   process, no commit of another, nothing forgotten since), which exists only while this process is the ledger's
///   one writer;
/// - the instant asked about lies in the answer's ``AccountReport/unchangedSpan(rules:)``.
final class AccountAnswers: Sendable {
    private struct Kept {
        var stamp: PurchaseLedger.MemoryStamp
        var span: Range<Int64>
        /// The answer's text up to its `at`, in pieces: most of it is the transactions' texts kept across requests.
        var pieces: [ArraySlice<UInt8>]
    }

    /// Pieces shared with the transactions' kept texts are counted whole, as if they were this memory's alone: the
    /// texts' own memory may forget them while an answer here still holds them.
    private let kept = Mutex(BoundedMemory<Kept>(byteLimit: 32 << 20))

    func pieces(of account: String, stamp: PurchaseLedger.MemoryStamp, at instant: Int64) -> [ArraySlice<UInt8>]? {
        guard let kept = kept.withLock({ $0[account] }), kept.stamp == stamp, kept.span.contains(instant) else {
            return nil
        }
        return kept.pieces
    }

    func keep(
        _ pieces: [ArraySlice<UInt8>], of account: String, stamp: PurchaseLedger.MemoryStamp, span: Range<Int64>
    ) {
        let bytes = pieces.reduce(0) { $0 + $1.count + 32 }
        kept.withLock { $0.remember(Kept(stamp: stamp, span: span, pieces: pieces), for: account, bytes: bytes) }
    }
}
