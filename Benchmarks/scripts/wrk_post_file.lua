-- POST the file named by $BODY_FILE to /v1/validate with Content-Type $CONTENT_TYPE (text/plain by default).
local file = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = os.getenv("CONTENT_TYPE") or "text/plain"
