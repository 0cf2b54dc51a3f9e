-- POST the file named by $BODY_FILE to /v1/validate ($CONTENT_TYPE, application/octet-stream by default) until $COUNT
-- answers have come back, then end wrk: for counting what a server does per request, where a fixed duration would give
-- a different number of requests each run. Run with -t1 (the count is per thread). A few more requests than COUNT may
-- be answered (those in flight on the other connections): count the server's access lines for the exact number.
-- wrk's own summary is not printed (`thread:stop()` would still wait out -d); an answer other than 200 exits 1.
local file = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = os.getenv("CONTENT_TYPE") or "application/octet-stream"

local count = assert(tonumber(os.getenv("COUNT")), "set COUNT")
local answered = 0

response = function(status)
    if status ~= 200 then
        io.stderr:write(string.format("answered %d\n", status))
        os.exit(1)
    end
    answered = answered + 1
    if answered >= count then os.exit(0) end
end
