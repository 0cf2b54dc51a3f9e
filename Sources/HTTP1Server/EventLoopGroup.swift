import Dispatch

/// The event loops of one server, and how long each recently made its requests wait, so that a loop whose requests
/// wait longest can hand a connection to the loop whose wait least.
///
/// Connections are dealt to loops when accepted and stay there, but loops do not get equal shares of the cores: on a
/// machine with as many loops as cores, whatever else runs (the clients themselves on a benchmark box, a log writer,
/// other processes) lands on some cores and not others, and every connection of a loop that shares its core waits
/// longer than those of a loop that has one to itself. Measured with 64 busy connections on 2 cores, one loop's
/// connections waited 1.3 to 2.6 times as long as the other's (`BENCHMARKS.md`, branch `tail`). Moving connections
/// until each loop's wait is about equal gives the faster loop more of them, which no fixed dealing can.
final class EventLoopGroup: Sendable {
    private struct Entry {
        weak var loop: EventLoop?
        var load = LoopLoad(wait: 0, activeConnections: 0)
        var measuredAt = DispatchTime(uptimeNanoseconds: 0)
    }

    private let entries = LockedState([Entry]())
    private let moves = LockedState(0)

    /// A loop moves a connection only when its requests wait this many times as long as the other loop's would with
    /// one connection more: less would move connections back and forth on noise (a 50 ms window holds a few hundred
    /// requests).
    static let imbalanceToMove = 1.1
    /// Below this wait (seconds), every connection is answered soon enough that no move is worth its system calls.
    static let waitWorthMoving = 0.0005
    /// A wait measured longer ago than this is stale: that loop has stopped sweeping, so it has no connections and
    /// counts as idle.
    static let staleAfterNanoseconds: UInt64 = 200_000_000

    init() {}

    /// Called once by each loop as it is made; returns its index.
    func join(_ loop: EventLoop) -> Int {
        entries.withLock { entries in
            entries.append(Entry(loop: loop))
            return entries.count - 1
        }
    }

    /// How many connections moved between loops since the server started.
    var movedConnections: Int { moves.withLock { $0 } }

    func noteMove() { moves.withLock { $0 += 1 } }

    /// Records loop `index`'s load and returns the loop that should take one of its connections, if any.
    func publish(_ load: LoopLoad, judged: Bool, at now: DispatchTime, from index: Int) -> EventLoop? {
        entries.withLock { entries in
            entries[index].load = load
            entries[index].measuredAt = now
            guard judged else { return nil }
            let others = entries.indices.filter { $0 != index && entries[$0].loop != nil }.map { other in
                let entry = entries[other]
                let isStale = now.uptimeNanoseconds &- entry.measuredAt.uptimeNanoseconds > Self.staleAfterNanoseconds
                return (index: other, load: isStale ? LoopLoad(wait: 0, activeConnections: 0) : entry.load)
            }
            guard let target = Self.target(for: load, among: others.map(\.load)) else { return nil }
            return entries[others[target].index].loop
        }
    }

    /// The position in `others` of the loop that should take one of the connections of a loop with `load`, or nil
    /// when no move would shorten the longest wait.
    ///
    /// A loop that answers at its own pace makes each of its busy connections wait in proportion to their number,
    /// so after a move the taker's wait grows by one connection's share: with few connections a move can make the
    /// taker wait longer than the giver did, and the connection would only come back.
    static func target(for load: LoopLoad, among others: [LoopLoad]) -> Int? {
        // A loop's only busy connection waits on nothing but itself.
        guard load.wait >= waitWorthMoving, load.activeConnections > 1,
            let least = others.indices.min(by: { others[$0].wait < others[$1].wait })
        else { return nil }
        let taker = others[least]
        let takerWaitAfter =
            taker.activeConnections == 0
            ? 0 : taker.wait * Double(taker.activeConnections + 1) / Double(taker.activeConnections)
        return load.wait > takerWaitAfter * imbalanceToMove ? least : nil
    }
}

/// How long a loop's requests waited during its last sweep interval, and on how many connections.
struct LoopLoad: Equatable {
    /// Seconds.
    var wait: Double
    /// Connections that sent a request during the interval.
    var activeConnections: Int
}
