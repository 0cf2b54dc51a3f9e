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

/// Collects check verdicts; the verdict's error is the failure that ranks first for the kind of signed data, so the
/// answer does not depend on the order checks ran in.
public struct CheckFindings: Sendable {
    public private(set) var failures: [ValidationError] = []
    private let ranking: [ValidationError.Code]

    public init(kind: SignedDataKind) {
        ranking =
            switch kind.envelope {
            case .pkcs7: ValidationError.Code.all
            case .jws: Self.storeKitRanking
            }
    }

    /// Notes the verdict and returns its outcome, for `ValidationChecks`.
    public mutating func record(_ verdict: CheckVerdict) -> CheckOutcome {
        if case .failed(let error) = verdict { failures.append(error) }
        return verdict.outcome
    }

    /// Of failures with the same code, the first recorded.
    public var firstError: ValidationError? {
        failures.min { precedence($0.code) < precedence($1.code) }
    }

    private func precedence(_ code: ValidationError.Code) -> Int {
        ranking.firstIndex(of: code) ?? ranking.count
    }

    /// Apple's libraries judge the app before the environment (INVALID_APP_IDENTIFIER before INVALID_ENVIRONMENT),
    /// so StoreKit 2 data failing both gets Apple's answer.
    private static let storeKitRanking: [ValidationError.Code] = [
        .malformedJWS, .certificateUntrusted, .signatureInvalid, .unknownKind, .kindMismatch, .bundleIDMismatch,
        .appAppleIDMismatch, .environmentNotAccepted, .versionNotAccepted, .deviceHashMismatch,
    ]
}
