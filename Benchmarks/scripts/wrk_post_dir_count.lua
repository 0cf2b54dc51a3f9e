-- POST every file in $BODY_DIR once, in turn, to the target path ($CONTENT_TYPE, application/json by default), and end
-- wrk once as many answers as there are files came back: distinct bodies, so each request is new work for the server
-- (a notification stored, not a duplicate). With -cN the N connections are N concurrent senders; run with -t1.
-- An answer other than 200 exits 1; the caller times the run (wrk's own summary is not printed).
local directory = assert(os.getenv("BODY_DIR"), "set BODY_DIR")
local bodies = {}
local listing = io.popen('ls "' .. directory .. '"')
for name in listing:lines() do
    local file = assert(io.open(directory .. "/" .. name, "rb"))
    bodies[#bodies + 1] = file:read("*a")
    file:close()
end
listing:close()
assert(#bodies > 0, "no files in " .. directory)
local headers = { ["Content-Type"] = os.getenv("CONTENT_TYPE") or "application/json" }
local index = 0
local answered = 0

request = function()
    index = index % #bodies + 1
    return wrk.format("POST", nil, headers, bodies[index])
end

response = function(status)
    if status ~= 200 then
        io.stderr:write(string.format("answered %d\n", status))
        os.exit(1)
    end
    answered = answered + 1
    if answered >= #bodies then os.exit(0) end
end
