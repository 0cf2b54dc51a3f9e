import Ledger
import ReceiptEngine

/// A subscription's history as the ledger knows it, laid out in time: one bar per transaction (renewals follow each
/// other), refunds, grace and billing-retry periods past and present, every stored notification, the expiry and
/// "now". Dates are Unix milliseconds.
///
/// Only the newest renewal info is stored, so the current grace or billing-retry period comes from it, and earlier
/// ones from the notifications Apple sent when they began and ended (`DID_FAIL_TO_RENEW`, `GRACE_PERIOD_EXPIRED`,
/// then `DID_RENEW`, `EXPIRED`, …).
struct SubscriptionTimeline: Sendable, Hashable {
    struct Bar: Sendable, Hashable {
        var transactionID: String
        var productID: String
        var start: Int64
        /// Nil for a purchase that does not expire (a one-time purchase).
        var end: Int64?
        var revokedAt: Int64?
        var revocationReason: Int?
        var isUpgraded: Bool
        /// Which row it is drawn on: transactions that overlap (an upgrade's old and new periods) go on separate rows.
        var lane: Int
    }

    enum PeriodKind: String, Sendable, Hashable {
        case grace = "grace"
        case billingRetry = "billing-retry"
    }

    struct Period: Sendable, Hashable {
        var kind: PeriodKind
        var start: Int64
        var end: Int64
        /// Still running at `now`; `end` is then `now`, not when it will end.
        var isOngoing: Bool
        /// Over before the current renewal info: known from notifications.
        var isPast = false
    }

    /// One line of the events table, the drawing's text alternative.
    struct Event: Sendable, Hashable {
        /// A stable word for tests and styles: `purchase`, `renewal`, `product_change`, `refund`, `grace_period`,
        /// `billing_retry`, `expiry`, `notification`, `now`.
        var kind: String
        var date: Int64
        var title: String
        var transactionID: String?
        var productID: String?
        var detail: String
    }

    var bars: [Bar]
    var periods: [Period]
    /// The deciding transaction's expiry, if it has one.
    var expiry: Int64?
    var now: Int64
    var events: [Event]
    /// The drawn span, `start` < `end`.
    var start: Int64
    var end: Int64
    var laneCount: Int { (bars.map(\.lane).max() ?? 0) + 1 }

    /// Rows beyond this share the last one: a drawing stays readable, and the table lists everything anyway.
    static let maximumLanes = 4
    /// Dates outside year 1 to 9999 are clamped for drawing; nothing Apple signs comes near them.
    static let earliest: Int64 = -62_135_596_800_000
    static let latest: Int64 = 253_402_300_799_999

    init(_ facts: SubscriptionFacts, now: Int64) {
        let clamp = { (date: Int64) in min(max(date, Self.earliest), Self.latest) }
        let now = clamp(now)
        // Oldest first; ties by id so that the drawing never depends on the store's order.
        let transactions = facts.transactions.sorted {
            (clamp($0.purchaseDate ?? $0.signedDate), $0.transactionID) < (clamp($1.purchaseDate ?? $1.signedDate), $1.transactionID)
        }
        var laneEnds: [Int64] = []
        var bars: [Bar] = []
        for facts in transactions {
            let start = clamp(facts.purchaseDate ?? facts.signedDate)
            let end = facts.expiresDate.map { max(clamp($0), start) }
            let lane =
                laneEnds.firstIndex { $0 <= start }
                ?? (laneEnds.count < Self.maximumLanes ? laneEnds.count : Self.maximumLanes - 1)
            if lane == laneEnds.count { laneEnds.append(.min) }
            laneEnds[lane] = max(laneEnds[lane], end ?? start)
            bars.append(
                Bar(
                    transactionID: facts.transactionID, productID: facts.productID, start: start, end: end,
                    revokedAt: facts.revocationDate.map(clamp), revocationReason: facts.revocationReason,
                    isUpgraded: facts.isUpgraded == true, lane: lane))
        }

        let latest = facts.latestTransaction
        let expiry = latest?.expiresDate.map(clamp)
        var current: [Period] = []
        if let expiry, latest?.revocationDate == nil, let renewal = facts.renewal,
            renewal.isInBillingRetryPeriod == true
        {
            var retryStart = expiry
            if let graceEnd = renewal.gracePeriodExpiresDate.map(clamp), graceEnd > expiry {
                current.append(Period(kind: .grace, start: expiry, end: graceEnd, isOngoing: now < graceEnd && now >= expiry))
                retryStart = graceEnd
            }
            // Apple keeps retrying after the grace period; what is drawn is what has happened so far.
            if now > retryStart {
                current.append(Period(kind: .billingRetry, start: retryStart, end: now, isOngoing: true))
            }
        }
        let periods = Self.pastPeriods(facts, bars: bars, current: current, now: now, clamp: clamp) + current

        self.bars = bars
        self.periods = periods
        self.expiry = expiry
        self.now = now
        self.events = Self.events(bars: bars, periods: periods, expiry: expiry, now: now, facts: facts)
        let dates = bars.flatMap { [$0.start, $0.end, $0.revokedAt].compactMap { $0 } } + periods.map(\.end) + [now]
        let (first, last) = (dates.min() ?? now, dates.max() ?? now)
        // A margin either side, so that a marker at an edge stays visible; at least a day in all.
        let margin = max((last - first) / 25, 43_200_000)
        self.start = max(first - margin, Self.earliest)
        self.end = min(last + margin, Self.latest)
    }

    /// Grace and billing-retry periods that notifications opened and closed. One still open when the notifications
    /// end is the current one when the renewal info says so (drawn from it instead), else it ended by the newest
    /// fact the ledger has, which is when it was last heard of.
    private static func pastPeriods(
        _ facts: SubscriptionFacts, bars: [Bar], current: [Period], now: Int64, clamp: (Int64) -> Int64
    ) -> [Period] {
        var periods: [Period] = []
        var open: (kind: PeriodKind, start: Int64)?
        func close(at date: Int64) {
            guard let period = open else { return }
            periods.append(
                Period(
                    kind: period.kind, start: period.start, end: max(date, period.start), isOngoing: false, isPast: true))
            open = nil
        }
        /// A renewal that started after the period began ended it, notified or not.
        func closeByRenewal(before date: Int64) {
            guard let period = open,
                let renewed = bars.map(\.start).filter({ $0 > period.start && $0 <= date }).min()
            else { return }
            close(at: renewed)
        }
        for notification in facts.notifications {
            let date = clamp(notification.signedDate)
            closeByRenewal(before: date)
            switch notification.type {
            case "DID_FAIL_TO_RENEW":
                guard open == nil else { continue }
                // The renewal that failed was due when the last period before the notice ended.
                let due = bars.compactMap(\.end).filter { $0 <= date }.max() ?? date
                open = (notification.subtype == "GRACE_PERIOD" ? .grace : .billingRetry, due)
            case "GRACE_PERIOD_EXPIRED":
                guard open?.kind == .grace else { continue }
                close(at: date)
                open = (.billingRetry, date)
            case "DID_RENEW", "SUBSCRIBED", "EXPIRED", "REFUND", "REVOKE":
                close(at: date)
            default:
                continue
            }
        }
        closeByRenewal(before: now)
        if open != nil {
            if current.isEmpty {
                let lastHeard = [facts.renewal?.signedDate, facts.notifications.last?.signedDate]
                    .compactMap { $0 }.max()
                close(at: min(clamp(lastHeard ?? now), now))
            } else {
                open = nil
            }
        }
        return periods
    }

    private static func events(
        bars: [Bar], periods: [Period], expiry: Int64?, now: Int64, facts: SubscriptionFacts
    ) -> [Event] {
        var events: [Event] = []
        var previousProduct: String?
        for (index, bar) in bars.enumerated() {
            let kind: String
            let title: String
            if index == 0 {
                (kind, title) = ("purchase", "Purchased")
            } else if bar.productID != previousProduct {
                (kind, title) = ("product_change", "Changed product")
            } else {
                (kind, title) = ("renewal", "Renewed")
            }
            previousProduct = bar.productID
            var detail = bar.end.map { "until \(LookupPage.dateText($0))" } ?? "does not expire"
            if bar.isUpgraded { detail += "; upgraded to a higher product of its group" }
            events.append(
                Event(
                    kind: kind, date: bar.start, title: title, transactionID: bar.transactionID,
                    productID: bar.productID, detail: detail))
            if let revokedAt = bar.revokedAt {
                events.append(
                    Event(
                        kind: "refund", date: revokedAt, title: "Refunded or revoked", transactionID: bar.transactionID,
                        productID: bar.productID, detail: LookupPage.revocationReasonText(bar.revocationReason)))
            }
        }
        // Before the grace period that starts at the same instant.
        if let expiry, let latest = facts.latestTransaction {
            events.append(
                Event(
                    kind: "expiry", date: expiry, title: expiry <= now ? "Expired" : "Expires",
                    transactionID: latest.transactionID, productID: latest.productID,
                    detail: facts.renewal?.autoRenewStatus == true && expiry > now ? "renews automatically" : ""))
        }
        for period in periods {
            let until = "until \(LookupPage.dateText(period.end))"
            let detail =
                switch (period.kind, period.isPast) {
                case (.grace, false): "payment failed, access kept while Apple retries, \(until)"
                case (.grace, true): "payment failed, access kept while Apple retried, \(until)"
                case (.billingRetry, false): "payment failed, no access while Apple retries (still retrying)"
                case (.billingRetry, true): "payment failed, no access while Apple retried, \(until)"
                }
            let (kind, title) =
                period.kind == .grace ? ("grace_period", "Billing grace period") : ("billing_retry", "Billing retry")
            events.append(
                Event(kind: kind, date: period.start, title: title, transactionID: nil, productID: nil, detail: detail))
        }
        for notification in facts.notifications {
            events.append(
                Event(
                    kind: "notification", date: notification.signedDate, title: "Notification from Apple",
                    transactionID: nil, productID: nil,
                    detail: notification.type + (notification.subtype.map { " / \($0)" } ?? "")))
        }
        // Last among events of the same millisecond: what happened then is part of what "now" shows.
        events.append(
            Event(kind: "now", date: now, title: "Now (this page)", transactionID: nil, productID: nil, detail: ""))
        // Stable: by date, then the order above (a purchase before its refund on the same millisecond).
        return events.enumerated().sorted { ($0.element.date, $0.offset) < ($1.element.date, $1.offset) }.map(\.element)
    }
}

// MARK: - Drawing

extension SubscriptionTimeline {
    static let width = 960.0
    static let left = 110.0
    static let right = 24.0
    /// Marker labels (expiry, now, refunds) stack in rows above the transactions, one row further down whenever a
    /// label would touch another.
    static let labelRowHeight = 17.0
    static let firstLabelBaseline = 14.0
    static let laneHeight = 30.0
    static let barHeight = 22.0
    static let billingRow = 30.0
    static let axisRow = 36.0

    /// Inline SVG: no script, no external reference, every text escaped. `index` keeps ids unique when a page draws
    /// several subscriptions.
    func svg(index: Int) -> String {
        let plot = Self.width - Self.left - Self.right
        let span = Double(end - start)
        func x(_ date: Int64) -> Double { Self.left + plot * Double(date - start) / span }
        var requests: [LabelRequest] = []
        let expiryFirst = (expiry ?? now) <= now
        if let expiry {
            requests.append(
                LabelRequest(
                    kind: "expiry", x: x(expiry),
                    text: (expiry <= now ? "expired " : "expires ") + LookupPage.dayText(expiry), prefersLeft: expiryFirst))
        }
        requests.append(
            LabelRequest(
                kind: "now", x: x(now), text: "now " + LookupPage.dayText(now), prefersLeft: expiry != nil && !expiryFirst))
        for bar in bars {
            if let revokedAt = bar.revokedAt {
                requests.append(LabelRequest(kind: "refund", x: x(revokedAt), text: "refund", prefersLeft: false))
            }
        }
        let labels = Self.layOut(requests)
        let labelRows = (labels.map(\.row).max() ?? 0) + 1
        let markerRow = Self.labelBaseline(row: labelRows - 1) + 8
        let lanesBottom = markerRow + Double(laneCount) * Self.laneHeight
        let billingTop = lanesBottom
        let axisY = lanesBottom + (periods.isEmpty ? 0 : Self.billingRow) + 6
        let height = axisY + Self.axisRow
        func escape(_ text: String) -> String { ResultHTML.escape(text) }
        let titleID = "timeline-title-\(index)"
        let descriptionID = "timeline-description-\(index)"

        var svg = """
            <svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(Self.number(Self.width)) \
            \(Self.number(height))" width="100%" role="img" aria-labelledby="\(titleID) \(descriptionID)">
            <title id="\(titleID)">Timeline of the subscription</title>
            <desc id="\(descriptionID)">\(bars.count) transaction(s) from \(escape(LookupPage.dateText(start))) to \
            \(escape(LookupPage.dateText(end))); every event is listed in the table below the drawing.</desc>

            """
        // Row names.
        for lane in 0..<laneCount {
            let y = markerRow + Double(lane) * Self.laneHeight + Self.barHeight / 2 + 4
            let name = lane == 0 ? "Purchases" : ""
            svg += "<text class=\"row-label\" x=\"\(Self.number(Self.left - 10))\" y=\"\(Self.number(y))\" "
                + "text-anchor=\"end\">\(name)</text>\n"
        }
        if !periods.isEmpty {
            svg += "<text class=\"row-label\" x=\"\(Self.number(Self.left - 10))\" "
                + "y=\"\(Self.number(billingTop + Self.barHeight / 2 + 4))\" text-anchor=\"end\">Billing</text>\n"
        }

        // The axis and its ticks.
        svg += "<line class=\"axis\" x1=\"\(Self.number(Self.left))\" y1=\"\(Self.number(axisY))\" "
            + "x2=\"\(Self.number(Self.width - Self.right))\" y2=\"\(Self.number(axisY))\"/>\n"
        for tick in Self.ticks(from: start, to: end) {
            let tx = x(tick.date)
            svg += "<line class=\"tick\" x1=\"\(Self.number(tx))\" y1=\"\(Self.number(markerRow - 4))\" "
                + "x2=\"\(Self.number(tx))\" y2=\"\(Self.number(axisY + 5))\"/>\n"
            svg += "<text class=\"tick-label\" x=\"\(Self.number(tx))\" y=\"\(Self.number(axisY + 20))\" "
                + "text-anchor=\"middle\">\(escape(tick.label))</text>\n"
        }

        // Transactions.
        var refunds: [(Bar, Double, Double)] = []
        for (position, bar) in bars.enumerated() {
            let y = markerRow + Double(bar.lane) * Self.laneHeight
            let x0 = x(bar.start)
            // A purchase that does not expire is a short block where it was bought.
            let x1 = bar.end.map { max(x($0), x0 + 3) } ?? x0 + 6
            var classes = ["bar"]
            if position % 2 == 1 { classes.append("alternate") }
            if bar.isUpgraded { classes.append("upgraded") }
            if bar.end == nil { classes.append("one-time") }
            if bar.revokedAt != nil { classes.append("revoked") }
            let period = bar.end.map { "\(LookupPage.dateText(bar.start)) to \(LookupPage.dateText($0))" }
                ?? "bought \(LookupPage.dateText(bar.start))"
            svg += "<rect class=\"\(classes.joined(separator: " "))\" data-transaction-id=\"\(escape(bar.transactionID))\" "
                + "x=\"\(Self.number(x0))\" y=\"\(Self.number(y))\" width=\"\(Self.number(x1 - x0))\" "
                + "height=\"\(Self.number(Self.barHeight))\" rx=\"3\">"
                + "<title>Transaction \(escape(bar.transactionID)), \(escape(bar.productID)): \(escape(period))</title></rect>\n"
            if let revokedAt = bar.revokedAt {
                let rx = x(revokedAt)
                if let end = bar.end, revokedAt < end {
                    svg += "<rect class=\"revoked-part\" x=\"\(Self.number(rx))\" y=\"\(Self.number(y))\" "
                        + "width=\"\(Self.number(max(x(end) - rx, 2)))\" height=\"\(Self.number(Self.barHeight))\"/>\n"
                }
                refunds.append((bar, rx, y))
            }
            // Apple ids are digits; about 7 units a character at this size.
            if x1 - x0 > Double(bar.transactionID.count) * 7 + 10 {
                svg += "<text class=\"bar-label\" x=\"\(Self.number(x0 + 5))\" y=\"\(Self.number(y + Self.barHeight / 2 + 4))\">"
                    + "\(escape(bar.transactionID))</text>\n"
            }
        }
        // Refund marks over every bar, their labels in the rows above.
        for (label, (bar, rx, y)) in zip(labels.filter { $0.kind == "refund" }, refunds) {
            let revokedAt = bar.revokedAt ?? bar.start
            svg += "<g class=\"refund\" data-transaction-id=\"\(escape(bar.transactionID))\">"
                + "<title>Refunded or revoked \(escape(LookupPage.dateText(revokedAt))): transaction "
                + "\(escape(bar.transactionID))</title>"
                + "<line x1=\"\(Self.number(rx))\" y1=\"\(Self.number(label.baseline + 3))\" x2=\"\(Self.number(rx))\" "
                + "y2=\"\(Self.number(y + Self.barHeight + 4))\"/>"
                + label.text(escape) + "</g>\n"
        }

        // Grace and billing-retry periods, past and current.
        for period in periods {
            let x0 = x(period.start)
            let x1 = max(x(period.end), x0 + 3)
            let name = period.kind == .grace ? "grace period" : "billing retry"
            let until = period.isOngoing && period.kind == .billingRetry
                ? "still retrying" : "until \(LookupPage.dateText(period.end))"
            svg += "<rect class=\"\(period.kind.rawValue)\" data-period=\"\(period.isPast ? "past" : "current")\" "
                + "x=\"\(Self.number(x0))\" y=\"\(Self.number(billingTop))\" "
                + "width=\"\(Self.number(x1 - x0))\" height=\"\(Self.number(Self.barHeight))\" rx=\"3\">"
                + "<title>\(name) from \(escape(LookupPage.dateText(period.start))), \(escape(until))</title></rect>\n"
            if x1 - x0 > Double(name.count) * 7 + 10 {
                svg += "<text class=\"period-label\" x=\"\(Self.number(x0 + 5))\" "
                    + "y=\"\(Self.number(billingTop + Self.barHeight / 2 + 4))\">\(name)</text>\n"
            }
        }

        // The expiry and now: vertical lines over every row, labels in the rows above.
        for label in labels where label.kind != "refund" {
            svg += "<g class=\"\(label.kind)\"><line x1=\"\(Self.number(label.x))\" y1=\"\(Self.number(label.baseline - 10))\" "
                + "x2=\"\(Self.number(label.x))\" y2=\"\(Self.number(axisY))\"/>" + label.text(escape) + "</g>\n"
        }
        return svg + "</svg>"
    }

    // MARK: - Marker labels

    struct LabelRequest: Sendable, Hashable {
        var kind: String
        /// Where the marker's line is drawn.
        var x: Double
        var text: String
        var prefersLeft: Bool
    }

    struct PlacedLabel: Sendable, Hashable {
        var kind: String
        var x: Double
        var label: String
        var row: Int
        var leftwards: Bool
        /// What the text covers horizontally, as estimated for layout.
        var extent: ClosedRange<Double>

        var baseline: Double { SubscriptionTimeline.labelBaseline(row: row) }

        func text(_ escape: (String) -> String) -> String {
            "<text x=\"\(SubscriptionTimeline.number(leftwards ? x - 4 : x + 4))\" y=\"\(SubscriptionTimeline.number(baseline))\" "
                + "text-anchor=\"\(leftwards ? "end" : "start")\">\(escape(label))</text>"
        }
    }

    static func labelBaseline(row: Int) -> Double { firstLabelBaseline + Double(row) * labelRowHeight }

    /// Wider than any 13 px sans-serif glyph these labels use (digits, lower-case letters, a dash), bold included:
    /// DejaVu Sans Bold, a common fallback and among the widest, draws digits 0.7 em (9.1 px) wide. An estimate that
    /// errs wide keeps labels apart in every browser.
    static let labelCharacterWidth = 9.5
    static let labelGap = 6.0

    /// Places each label in the first row where it touches no label already placed, on its preferred side of its
    /// marker when there is room, else the other; a label never leaves the drawing's width.
    static func layOut(_ requests: [LabelRequest]) -> [PlacedLabel] {
        var placed: [PlacedLabel] = []
        for request in requests {
            let width = Double(request.text.count) * labelCharacterWidth
            let left = request.x - 4 - width...request.x - 4
            let right = request.x + 4...request.x + 4 + width
            var sides = request.prefersLeft ? [(true, left), (false, right)] : [(false, right), (true, left)]
            sides = sides.filter { $0.1.lowerBound >= 0 && $0.1.upperBound <= Self.width }
            if sides.isEmpty { sides = [request.x > Self.width / 2 ? (true, left) : (false, right)] }
            var row = 0
            while true {
                let taken = placed.filter { $0.row == row }.map(\.extent)
                let free = sides.first { side in
                    !taken.contains { $0.lowerBound - labelGap < side.1.upperBound && side.1.lowerBound < $0.upperBound + labelGap }
                }
                if let free {
                    placed.append(
                        PlacedLabel(
                            kind: request.kind, x: request.x, label: request.text, row: row, leftwards: free.0, extent: free.1))
                    break
                }
                row += 1
            }
        }
        return placed
    }

    /// One decimal is plenty for a 960-unit drawing, and keeps the page byte-for-byte stable.
    static func number(_ value: Double) -> String {
        let tenths = (value * 10).rounded()
        guard tenths.isFinite, abs(tenths) < 1e12 else { return "0" }
        let whole = Int64(tenths)
        let sign = whole < 0 ? "-" : ""
        let magnitude = whole.magnitude
        return magnitude % 10 == 0 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
    }

    // MARK: - Ticks

    struct Tick: Sendable, Hashable {
        var date: Int64
        var label: String
    }

    /// Calendar-aligned ticks, at most about eight: days or weeks for a short span, then months, quarters, years.
    static func ticks(from start: Int64, to end: Int64) -> [Tick] {
        let day: Int64 = 86_400_000
        let spanDays = (end - start) / day
        let maximum: Int64 = 8
        if spanDays <= 60 {
            let step = [1, 2, 7, 14, 30].first { spanDays / $0 <= maximum } ?? 30
            var date = floorDivision(start, day) * day
            if date < start { date += day }
            var ticks: [Tick] = []
            while date <= end, ticks.count <= maximum + 1 {
                ticks.append(Tick(date: date, label: LookupPage.dayText(date)))
                date += step * day
            }
            return ticks
        }
        let spanMonths = spanDays / 30
        let step = [1, 2, 3, 6, 12].first { spanMonths / $0 <= maximum } ?? 12 * max(1, (spanMonths / 12 + maximum - 1) / maximum)
        let first = CivilDate(days: floorDivision(start, day))
        // The first month boundary at or after `start` that is a multiple of `step` months into the year.
        var monthIndex = first.year * 12 + (first.month - 1) + 1
        while monthIndex % step != 0 { monthIndex += 1 }
        var ticks: [Tick] = []
        while ticks.count <= maximum + 1 {
            let civil = CivilDate(year: floorDivision(monthIndex, 12), month: monthIndex - floorDivision(monthIndex, 12) * 12 + 1, day: 1)
            let date = civil.daysSince1970 * day
            guard date <= end else { break }
            let label = step >= 12 ? "\(civil.year)" : civil.monthText
            if date >= start { ticks.append(Tick(date: date, label: label)) }
            monthIndex += step
        }
        return ticks
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor
        return value % divisor < 0 ? quotient - 1 : quotient
    }
}

/// A proleptic Gregorian date, converted by the engine's `CivilTime`, without Foundation's calendars.
struct CivilDate: Sendable, Hashable {
    var year: Int64
    var month: Int64
    var day: Int64

    init(year: Int64, month: Int64, day: Int64) {
        (self.year, self.month, self.day) = (year, month, day)
    }

    init(days: Int64) {
        let civil = CivilTime(secondsSince1970: days * 86_400)
        (year, month, day) = (Int64(civil.year), Int64(civil.month), Int64(civil.day))
    }

    var daysSince1970: Int64 {
        Int64(CivilTime.daysSince1970(year: Int(year), month: Int(month), day: Int(day)))
    }

    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    var monthText: String { "\(Self.monthNames[Int(month - 1)]) \(year)" }
}
