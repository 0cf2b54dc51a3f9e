import HTTP1Server

extension ReceiptRoutes {
    /// `POST /v1/offers/promotional`.
    func signPromotionalOffer(_ request: HTTPRequest) -> HTTPResponse {
        problem(RequestProblem(status: .notImplemented, code: .notImplemented, message: "not implemented yet"))
    }

    /// `POST /v1/offers/introductory-eligibility`.
    func signIntroductoryOfferEligibility(_ request: HTTPRequest) -> HTTPResponse {
        problem(RequestProblem(status: .notImplemented, code: .notImplemented, message: "not implemented yet"))
    }
}
