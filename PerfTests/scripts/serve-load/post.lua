-- wrk script: POST a new Product per request, its key unique per run, thread and request:
-- ProductID = RUN (one letter, environment variable RUN) .. thread number (1-9) .. a 7-digit counter,
-- e.g. "A10000042", under the prefix "L" (10 characters, the key's MaxLength).
--
-- Every response is checked: a 201 with a Location naming the key that was sent. done() prints
--   post-summary: issued=N created201=N other=N
--   post-unanswered: KEY         (one line per request sent but not answered when wrk stopped)
-- so the caller can match the store's count of new products exactly: the 201s, plus those of the
-- unanswered requests that the server applied after wrk stopped listening.
local run = os.getenv("RUN") or "A"
local threads = {}

function setup(thread)
    threads[#threads + 1] = thread
    thread:set("tid", #threads)
end

-- Globals, so that done() can read them with thread:get.
issued, created, other = 0, 0, 0
pending = {}
local headers = { ["Content-Type"] = "application/json", ["Accept"] = "application/json" }
local categories = { "Notebooks", "Tablets", "Smartphones", "Headsets", "Printers", "Software" }

function request()
    issued = issued + 1
    local key = string.format("L%s%d%07d", run, tid, issued)
    pending[key] = true
    local body = string.format(
        '{"ProductID":"%s","Name":"Load test product %d","Category":"%s","SupplierID":"0100000000","Price":%d.%03d,"CurrencyCode":"EUR","WeightMeasure":%d.5}',
        key, issued, categories[issued % #categories + 1], issued % 5000, issued % 1000, issued % 40)
    return wrk.format("POST", "/Products", headers, body)
end

function response(status, hdrs, body)
    local location = hdrs["Location"] or hdrs["location"] or ""
    local key = string.match(location, "Products%('([^']+)'%)")
    if status == 201 and key and pending[key] then
        pending[key] = nil
        created = created + 1
    else
        other = other + 1
        if other <= 5 then io.stderr:write("post.lua: unexpected response " .. status .. " " .. location .. " " .. body:sub(1, 300) .. "\n") end
    end
end

function done(summary, latency, requests)
    local n, c, o = 0, 0, 0
    for _, t in ipairs(threads) do
        n, c, o = n + t:get("issued"), c + t:get("created"), o + t:get("other")
        for key, _ in pairs(t:get("pending")) do io.write("post-unanswered: " .. key .. "\n") end
    end
    io.write(string.format("post-summary: issued=%d created201=%d other=%d\n", n, c, o))
end
