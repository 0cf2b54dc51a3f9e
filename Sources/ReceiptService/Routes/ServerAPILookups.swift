public import AppStoreServerAPI
import HTTP1Server
public import JSONText
import Ledger
import ReceiptEngine
import StoreKitJWS
internal import Synchronization

/// One App Store Server API client per app and environment, made on first use and kept, so a bearer token and a
/// connection are reused. A request's path bounds it (`bounded(until:)`) by its deadline; background work waits as long
/// as Apple asks.
public final class ServerAPIClients: Sendable {
    private let configuration: ServiceConfiguration
    private let metrics: ServerAPIMetrics?
    private let clients = Mutex<[String: AppStoreServerAPIClient]>([:])

    public init(configuration: ServiceConfiguration, metrics: ServerAPIMetrics? = nil) {
        self.configuration = configuration
        self.metrics = metrics
    }

    public func client(
        bundleID: String, environment: AppStoreEnvironment
    ) throws(AppStoreServerAPIError) -> AppStoreServerAPIClient {
        let key = "\(environment.rawValue) \(bundleID)"
        if let client = clients.withLock({ $0[key] }) { return client }
        let client = try configuration.makeServerAPIClient(
            bundleID: bundleID, environment: environment, observer: metrics?.observer)
        return clients.withLock { clients in
            if let existing = clients[key] { return existing }
            clients[key] = client
            return client
        }
    }

    /// Every app with a key, in each environment `environments` allows: where an order or transaction may be.
    var targets: [(bundleID: String, environment: AppStoreEnvironment)] {
        let allowed = AppStoreEnvironment.allCases.filter { environment in
            configuration.environments.contains { $0.rawValue == environment.rawValue }
        }
        return configuration.serverAPIApps.flatMap { app in allowed.map { (app.bundleID, $0) } }
    }
}

/// Whether a request may wait on Apple now.
public enum AppleAdmission: Sendable, Hashable {
    case admitted
    /// `server_api.max_concurrent_requests` requests already wait on Apple: this one is answered `server_api_busy`.
    case busy
}

/// What an order or transaction lookup found: the verified transactions (already in the ledger when one is
/// configured), or why there are none.
public enum ServerAPILookup: Sendable {
    case found([JSONValue])
    /// Apple does not know the order or transaction in any configured app and environment.
    case notFound
    /// No app has a `server_api` key.
    case notConfigured
    /// Apple could not be reached, or refused the key; the errors say why.
    case unavailable([AppStoreServerAPIError])
    /// Apple was not asked: too many requests wait on it already, or it asked to wait past the request's deadline
    /// (`retryAfterSeconds` says how long, when it did).
    case busy(retryAfterSeconds: Int?, [AppStoreServerAPIError])
}

extension ServerAPILookup {
    /// The answer to a request for a lookup that failed `unavailable` or `busy`: the first of Apple's own error codes
    /// with it, and when to come back.
    func problem(_ message: String) -> RequestProblem? {
        switch self {
        case .unavailable(let failures):
            return RequestProblem(
                status: 503, code: .serverAPIUnavailable, message: message + failures.map(\.detail).joined(separator: "; "),
                appleErrorCode: failures.lazy.compactMap(\.appleErrorCode).first)
        case .busy(let seconds, let failures):
            let reason =
                failures.isEmpty
                ? "server_api.max_concurrent_requests lookups already wait on Apple"
                : failures.map(\.detail).joined(separator: "; ")
            return RequestProblem(
                status: 503, code: .serverAPIBusy, message: message + reason,
                appleErrorCode: failures.lazy.compactMap(\.appleErrorCode).first, retryAfterSeconds: max(1, seconds ?? 1))
        case .found, .notFound, .notConfigured:
            return nil
        }
    }
}

extension ReceiptRoutes {
    /// Look Up Order ID in every app and environment with a key until one knows the order. Each signed transaction is
    /// verified like any other before it is shown or stored; one that fails is logged and dropped.
    public func lookUpOrder(_ orderID: String, apple: AppleAdmission = .admitted) -> ServerAPILookup {
        lookUp(apple) { client throws(AppStoreServerAPIError) in
            let answer = try client.lookUpOrder(orderID: orderID)
            return answer.isValid ? answer.signedTransactions : nil
        }
    }

    /// Get Transaction Info in every app and environment with a key until one knows the transaction.
    public func lookUpTransaction(_ transactionID: String, apple: AppleAdmission = .admitted) -> ServerAPILookup {
        lookUp(apple) { client throws(AppStoreServerAPIError) in
            do throws(AppStoreServerAPIError) {
                return [try client.transactionInfo(transactionID: transactionID)]
            } catch {
                guard error.code == .notFound else { throw error }
                return nil
            }
        }
    }

    private func lookUp(
        _ apple: AppleAdmission, _ ask: (AppStoreServerAPIClient) throws(AppStoreServerAPIError) -> [String]?
    ) -> ServerAPILookup {
        let targets = serverAPIClients.targets
        guard !targets.isEmpty else { return .notConfigured }
        guard apple == .admitted else { return .busy(retryAfterSeconds: nil, []) }
        // One deadline for the whole request, however many apps and environments it asks in turn.
        let deadline = wallClockSeconds() + configuration.serverAPI.requestDeadline
        var failures: [AppStoreServerAPIError] = []
        for target in targets {
            do {
                let client = try serverAPIClients.client(bundleID: target.bundleID, environment: target.environment)
                    .bounded(until: deadline)
                guard let signed = try ask(client) else { continue }
                return .found(intake.takeLookedUp(signed).map(Self.transactionJSON))
            } catch {
                var fields = [("app", target.bundleID), ("environment", target.environment.rawValue), ("code", error.code.rawValue)]
                if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
                if let appleMessage = error.appleErrorMessage {
                    fields.append(("apple_error_message", ServiceLog.clipped(appleMessage)))
                }
                log?.event("server api request failed", fields)
                failures.append(error)
            }
        }
        if failures.isEmpty { return .notFound }
        let busy = failures.filter { $0.code == .busy }
        guard busy.isEmpty else {
            return .busy(retryAfterSeconds: busy.compactMap(\.retryAfterSeconds).min(), failures)
        }
        return .unavailable(failures)
    }

    /// `GET /v1/orders/{order_id}`.
    func order(id orderID: String, apple: AppleAdmission) -> HTTPResponse {
        let lookup = lookUpOrder(orderID, apple: apple)
        switch lookup {
        case .found(let transactions):
            return json(status: .ok, .object([("order_id", .string(orderID)), ("transactions", .array(transactions))]))
        case .notFound:
            return problem(RequestProblem(status: .notFound, code: .orderNotFound, message: "Apple knows no order \(orderID)"))
        case .notConfigured:
            return problem(RequestProblem(
                status: 503, code: .serverAPINotConfigured,
                message: "no app has a server_api key (key_id, issuer_id, private_key_file)"))
        case .unavailable, .busy:
            return problem(lookup.problem("") ?? RequestProblem(status: 503, code: .serverAPIUnavailable, message: ""))
        }
    }
}
