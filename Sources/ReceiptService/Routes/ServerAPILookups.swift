public import AppStoreServerAPI
import HTTP1Server
public import JSONText
import Ledger
import ReceiptEngine
import StoreKitJWS
internal import Synchronization

/// One App Store Server API client per app and environment, made on first use and kept, so a bearer token is reused
/// until shortly before it expires.
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
}

extension ReceiptRoutes {
    /// Look Up Order ID in every app and environment with a key until one knows the order. Each signed transaction is
    /// verified like any other before it is shown or stored; one that fails is logged and dropped.
    public func lookUpOrder(_ orderID: String) -> ServerAPILookup {
        lookUp { client throws(AppStoreServerAPIError) in
            let answer = try client.lookUpOrder(orderID: orderID)
            return answer.isValid ? answer.signedTransactions : nil
        }
    }

    /// Get Transaction Info in every app and environment with a key until one knows the transaction.
    public func lookUpTransaction(_ transactionID: String) -> ServerAPILookup {
        lookUp { client throws(AppStoreServerAPIError) in
            do throws(AppStoreServerAPIError) {
                return [try client.transactionInfo(transactionID: transactionID)]
            } catch {
                guard error.code == .notFound else { throw error }
                return nil
            }
        }
    }

    private func lookUp(_ ask: (AppStoreServerAPIClient) throws(AppStoreServerAPIError) -> [String]?) -> ServerAPILookup {
        let targets = serverAPIClients.targets
        guard !targets.isEmpty else { return .notConfigured }
        var failures: [AppStoreServerAPIError] = []
        for target in targets {
            do {
                let client = try serverAPIClients.client(bundleID: target.bundleID, environment: target.environment)
                guard let signed = try ask(client) else { continue }
                return .found(intake.takeLookedUp(signed).map(Self.transactionJSON))
            } catch {
                var fields = [("app", target.bundleID), ("environment", target.environment.rawValue), ("code", error.code.rawValue)]
                if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
                if let appleMessage = error.appleErrorMessage { fields.append(("apple_error_message", appleMessage)) }
                log?.event("server api request failed", fields)
                failures.append(error)
            }
        }
        return failures.isEmpty ? .notFound : .unavailable(failures)
    }

    /// `GET /v1/orders/{order_id}`.
    func order(id orderID: String) -> HTTPResponse {
        switch lookUpOrder(orderID) {
        case .found(let transactions):
            return json(status: .ok, .object([("order_id", .string(orderID)), ("transactions", .array(transactions))]))
        case .notFound:
            return problem(RequestProblem(status: .notFound, code: .orderNotFound, message: "Apple knows no order \(orderID)"))
        case .notConfigured:
            return problem(RequestProblem(
                status: 503, code: .serverAPINotConfigured,
                message: "no app has a server_api key (key_id, issuer_id, private_key_file)"))
        case .unavailable(let failures):
            return problem(RequestProblem(
                status: 503, code: .serverAPIUnavailable,
                message: failures.map(\.detail).joined(separator: "; ")))
        }
    }
}
