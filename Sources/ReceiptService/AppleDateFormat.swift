public import ReceiptEngine

/// The three renderings Apple's verifyReceipt gives each date: `2024-05-01 12:00:00 Etc/GMT`, milliseconds as a
/// string, and Cupertino wall time `2024-05-01 05:00:00 America/Los_Angeles`.
///
/// Pacific time is computed from the US daylight-saving rules rather than the host's zoneinfo, so answers do not depend
/// on what a container image ships: since 2007 (Energy Policy Act of 2005) daylight time runs from the second Sunday of
/// March, 02:00 PST, to the first Sunday of November, 02:00 PDT; from 1987 to 2006 from the first Sunday of April to
/// the last Sunday of October. Earlier instants use the 1987 rules; no App Store receipt predates 2008.
public enum AppleDateFormat {
    public static func gmt(_ date: ReceiptDate) -> String {
        format(secondsSince1970: date.secondsSince1970) + " Etc/GMT"
    }

    public static func milliseconds(_ date: ReceiptDate) -> String {
        String(date.millisecondsSince1970)
    }

    public static func pacific(_ date: ReceiptDate) -> String {
        let seconds = date.secondsSince1970
        let offset: Int64 = isPacificDaylightTime(secondsSince1970: seconds) ? -7 * 3600 : -8 * 3600
        return format(secondsSince1970: seconds + offset) + " America/Los_Angeles"
    }

    /// Whether US Pacific daylight time is in force at that instant.
    static func isPacificDaylightTime(secondsSince1970 seconds: Int64) -> Bool {
        let year = CivilDate(daysSince1970: floorDivide(seconds, 86_400)).year
        let start: Int64
        let end: Int64
        if year >= 2007 {
            start = nthSunday(2, month: 3, year: year)
            end = nthSunday(1, month: 11, year: year)
        } else {
            start = nthSunday(1, month: 4, year: year)
            end = lastSunday(month: 10, year: year)
        }
        // 02:00 PST is 10:00 UTC; 02:00 PDT is 09:00 UTC.
        let startInstant = start * 86_400 + 10 * 3600
        let endInstant = end * 86_400 + 9 * 3600
        return seconds >= startInstant && seconds < endInstant
    }

    /// Days since 1970 of the n-th Sunday of a month.
    private static func nthSunday(_ n: Int, month: Int, year: Int) -> Int64 {
        let first = CivilDate.daysSince1970(year: year, month: month, day: 1)
        let daysToSunday = (7 - weekday(first)) % 7
        return first + Int64(daysToSunday + 7 * (n - 1))
    }

    private static func lastSunday(month: Int, year: Int) -> Int64 {
        let nextMonthFirst =
            month == 12
            ? CivilDate.daysSince1970(year: year + 1, month: 1, day: 1)
            : CivilDate.daysSince1970(year: year, month: month + 1, day: 1)
        let last = nextMonthFirst - 1
        return last - Int64(weekday(last))
    }

    /// 0 for Sunday; 1970-01-01 was a Thursday.
    private static func weekday(_ days: Int64) -> Int {
        Int(((days % 7) + 7 + 4) % 7)
    }

    private static func format(secondsSince1970 seconds: Int64) -> String {
        let days = floorDivide(seconds, 86_400)
        let rest = seconds - days * 86_400
        let civil = CivilDate(daysSince1970: days)
        return "\(pad(civil.year, 4))-\(pad(civil.month, 2))-\(pad(civil.day, 2)) "
            + "\(pad(Int(rest / 3600), 2)):\(pad(Int(rest % 3600 / 60), 2)):\(pad(Int(rest % 60), 2))"
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let (quotient, remainder) = a.quotientAndRemainder(dividingBy: b)
        return remainder < 0 ? quotient - 1 : quotient
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

/// A proleptic Gregorian date (Howard Hinnant's civil-from-days and days-from-civil).
struct CivilDate: Hashable {
    var year: Int
    var month: Int
    var day: Int

    init(daysSince1970 days: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        year = Int(yoe + era * 400 + (m <= 2 ? 1 : 0))
        month = Int(m)
        day = Int(d)
    }

    static func daysSince1970(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = Int64((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1)
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
