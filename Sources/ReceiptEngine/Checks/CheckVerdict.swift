/// What one check concluded. A failed check carries its error; checks never throw.
public enum CheckVerdict: Sendable, Hashable {
    case passed
    case failed(ValidationError)
    /// Nothing to compare: no policy for it, or the signed data does not carry the field.
    case skipped

    public var outcome: CheckOutcome {
        switch self {
        case .passed: .passed
        case .failed: .failed
        case .skipped: .skipped
        }
    }

    init(_ passes: Bool, else error: @autoclosure () -> ValidationError) {
        self = passes ? .passed : .failed(error())
    }
}

/// Collects check verdicts; the verdict's error is the failure that ranks first in `ValidationError.Code.all`, so
/// the answer does not depend on the order checks ran in.
public struct CheckFindings: Sendable {
    public private(set) var failures: [ValidationError] = []

    public init() {}

    /// Notes the verdict and returns its outcome, for `ValidationChecks`.
    public mutating func record(_ verdict: CheckVerdict) -> CheckOutcome {
        if case .failed(let error) = verdict { failures.append(error) }
        return verdict.outcome
    }

    public var firstError: ValidationError? {
        failures.min { $0.code.precedence < $1.code.precedence }
    }
}

extension ValidationError.Code {
    var precedence: Int { Self.all.firstIndex(of: self) ?? Self.all.count }
}
