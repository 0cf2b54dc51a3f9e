#if canImport(FoundationEssentials)
internal import FoundationEssentials
#else
internal import Foundation
#endif

/// A period of ISO 8601's `PnYnMnWnDTnHnMnS` form (`P1M`, `P1Y`, `P7D`, `PT36H`): how long a non-renewing
/// subscription lasts from its purchase date (`apps[].non_renewing_durations`).
///
/// Components are whole, non-negative numbers, in that order, each at most once; at least one is present, and `T`
/// comes only before time components. Weeks may be combined with the other components (ISO 8601-2 allows it).
public struct ISO8601Period: Sendable, Hashable, CustomStringConvertible {
    public var years = 0
    public var months = 0
    public var weeks = 0
    public var days = 0
    public var hours = 0
    public var minutes = 0
    public var seconds = 0

    public init(years: Int = 0, months: Int = 0, weeks: Int = 0, days: Int = 0, hours: Int = 0, minutes: Int = 0, seconds: Int = 0) {
        self.years = years
        self.months = months
        self.weeks = weeks
        self.days = days
        self.hours = hours
        self.minutes = minutes
        self.seconds = seconds
    }

    /// Far beyond any subscription, and small enough that adding it to any date neither overflows nor leaves the
    /// range of dates Foundation computes with.
    static let largestComponent = 1_000_000

    /// The period `text` writes, or nil when it is not one (`P`, `PT`, `P1.5M`, `P-1D`, `1M`, `P1D1M`, `P1H`).
    public static func parse(_ text: String) -> ISO8601Period? {
        var bytes = text.utf8[...]
        guard bytes.popFirst() == UInt8(ascii: "P") else { return nil }
        var period = ISO8601Period()
        var inTime = false
        var sawComponent = false
        var sawTimeComponent = false
        // Designators allowed next, in order: each may appear once and never after a later one.
        var dateDesignators: [UInt8] = Array("YMWD".utf8)
        var timeDesignators: [UInt8] = Array("HMS".utf8)
        while let first = bytes.first {
            if first == UInt8(ascii: "T") {
                guard !inTime else { return nil }
                inTime = true
                bytes.removeFirst()
                continue
            }
            var value = 0
            var digits = 0
            while let digit = bytes.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) {
                value = value * 10 + Int(digit - UInt8(ascii: "0"))
                digits += 1
                guard value <= largestComponent else { return nil }
                bytes.removeFirst()
            }
            guard digits > 0, let designator = bytes.popFirst() else { return nil }
            if inTime {
                guard let index = timeDesignators.firstIndex(of: designator) else { return nil }
                timeDesignators.removeSubrange(...index)
                switch designator {
                case UInt8(ascii: "H"): period.hours = value
                case UInt8(ascii: "M"): period.minutes = value
                default: period.seconds = value
                }
                sawTimeComponent = true
            } else {
                guard let index = dateDesignators.firstIndex(of: designator) else { return nil }
                dateDesignators.removeSubrange(...index)
                switch designator {
                case UInt8(ascii: "Y"): period.years = value
                case UInt8(ascii: "M"): period.months = value
                case UInt8(ascii: "W"): period.weeks = value
                default: period.days = value
                }
            }
            sawComponent = true
        }
        guard sawComponent, !inTime || sawTimeComponent else { return nil }
        return period
    }

    /// `milliseconds` (Unix time) plus this period in the Gregorian calendar of UTC, as Foundation's `Calendar`
    /// adds it: a month from January 31 ends on the last day of February, a year from February 29 on February 28.
    public func adding(to milliseconds: Int64) -> Int64 {
        var components = DateComponents()
        components.year = years
        components.month = months
        components.day = weeks * 7 + days
        components.hour = hours
        components.minute = minutes
        components.second = seconds
        let start = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        guard let end = Self.calendar.date(byAdding: components, to: start),
            let endMilliseconds = Int64(exactly: (end.timeIntervalSince1970 * 1000).rounded())
        else { return .max }
        return endMilliseconds
    }

    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .gmt
        return calendar
    }()

    /// The canonical text: `P1M`, `P1Y2M10DT2H30M`, `PT0S` for the empty period.
    public var description: String {
        var text = "P"
        for (value, designator) in [(years, "Y"), (months, "M"), (weeks, "W"), (days, "D")] where value != 0 {
            text += "\(value)\(designator)"
        }
        let time = [(hours, "H"), (minutes, "M"), (seconds, "S")].filter { $0.0 != 0 }
        if !time.isEmpty { text += "T" + time.map { "\($0.0)\($0.1)" }.joined() }
        return text == "P" ? "PT0S" : text
    }
}
