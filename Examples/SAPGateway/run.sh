#!/bin/sh
# The offline story against SAP Gateway (OData V2), with the offline-store tool and mock-sap's
# GWSAMPLE_BASIC service on 127.0.0.1:
#
#   sh Examples/SAPGateway/run.sh
#
# Needs: a built offline-store ('swift build'; or OFFLINE_STORE=/path/to/offline-store), curl,
# python3 (mock-sap is installed from PyPI into .venv-sap/ on first use). Every step prints
# what it did; the script exits 0 only if every step did what it should. KEEP=1 keeps the
# work directory (the store, the .ini, the server's log).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OS=${OFFLINE_STORE:-}
if [ -z "$OS" ]; then
    OS="$(cd "$ROOT" && swift build --show-bin-path 2>/dev/null)/offline-store" || true
fi
if [ ! -x "$OS" ]; then
    echo "run.sh: no offline-store at '$OS': run 'swift build' first, or set OFFLINE_STORE" >&2
    exit 2
fi
command -v curl > /dev/null || { echo "run.sh: needs curl" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sap-gateway-example.XXXXXX")
S="$WORK/store"
MOCK_PID=""
cleanup() {
    status=$?
    if [ -z "$MOCK_PID" ] && [ -s "$WORK/mock.pid" ]; then MOCK_PID=$(cat "$WORK/mock.pid"); fi
    if [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2> /dev/null; then
        # Gone within 10 s (SIGTERM ends it at once); then SIGKILL.
        n=0
        while kill -0 "$MOCK_PID" 2> /dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -9 "$MOCK_PID" 2> /dev/null || true
        wait "$MOCK_PID" 2> /dev/null || true
        echo "stopped mock-sap (pid $MOCK_PID)"
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n== %s\n' "$*"; }
fail() { echo "run.sh: FAILED: $*" >&2; exit 1; }
# The tool, echoed as a user would type it.
os() {
    echo "\$ offline-store $*"
    "$OS" "$@"
}
# The value of "Name":… in one JSON object on standard input (first match).
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\).*/\1/p" | head -n 1; }

step "1. start mock-sap (SAP Gateway V2 and S/4 services) on 127.0.0.1"
sh "$ROOT/scripts/mock-sap-server.sh" --lifetime 600 --pid-file "$WORK/mock.pid" > "$WORK/mock.out" 2>&1 &
MOCK_PID=$!
i=0
until grep -q "mock-sap serving at" "$WORK/mock.out" 2> /dev/null; do
    i=$((i + 1))
    # The first run makes the venv and installs mock-sap from PyPI.
    [ $i -lt 1200 ] && kill -0 "$MOCK_PID" 2> /dev/null || { cat "$WORK/mock.out" >&2; fail "mock-sap did not start"; }
    sleep 0.25
done
[ -s "$WORK/mock.pid" ] && MOCK_PID=$(cat "$WORK/mock.pid")
URL=$(sed -n 's/.*mock-sap serving at \(http[^ ]*\).*/\1/p' "$WORK/mock.out" | head -n 1)
SVC="$URL/sap/opu/odata/IWBEP/GWSAMPLE_BASIC"
echo "mock-sap serving at $URL (pid $MOCK_PID); the service: $SVC/"

step "2. fetch GWSAMPLE_BASIC's \$metadata"
curl -sS -f -o "$WORK/metadata.xml" "$SVC/\$metadata"
echo "$(wc -c < "$WORK/metadata.xml") bytes, $(grep -c '<EntitySet ' "$WORK/metadata.xml") entity sets"

step "3. make the store from SAP's application configuration file (app.ini)"
cat > "$WORK/app.ini" << EOF
# The offline configuration of the sales app, as SAP's offline store reads it.
[endpoint]
name=$SVC
indexed_type=GWSAMPLE_BASIC.Product: Category
indexed_type=GWSAMPLE_BASIC.BusinessPartner: Address/Country
local_change_expiry=10080

[defining_request]
name=SG_Sales
defining_query=BusinessPartnerSet?\$filter=Address/Country eq 'DE'&\$expand=ToSalesOrders/ToLineItems

[defining_request]
name=SG_Product
defining_query=ProductSet
EOF
cat "$WORK/app.ini"
echo "(local_change_expiry has no meaning here: init warns about it, naming its line)"
os init --store "$S" --metadata "$WORK/metadata.xml" --config "$WORK/app.ini"

step "4. refresh: download SG_Sales and SG_Product"
os refresh --store "$S"

step "5. findAll and findBy, answered from the store"
os query --store "$S" "ProductSet?\$select=ProductID,Name,Category,Price&\$orderby=ProductID" --format table
os query --store "$S" "ProductSet?\$filter=Category eq 'Notebooks'&\$select=ProductID,Name,Price" --format table
os query --store "$S" "BusinessPartnerSet?\$select=BusinessPartnerID,CompanyName&\$orderby=BusinessPartnerID&\$top=3" --format table
os query --store "$S" "SalesOrderSet?\$count=true&\$top=0" | grep -q '"@odata.count"' || fail "no count of sales orders"
echo "sales orders of German partners in the store: $("$OS" query --store "$S" "SalesOrderSet?\$count=true&\$top=0" | field '@odata.count')"

step "6. change data offline: create a product, update a price, delete a product, create an order with its item"
os create --store "$S" ProductSet '{"ProductID":"HT-9001","TypeCode":"PR","Category":"Notebooks","Name":"Notebook Offline 14","SupplierID":"0100000000","TaxTarifCode":1,"MeasureUnit":"EA","CurrencyCode":"EUR","Price":1299.00}'
os update --store "$S" "ProductSet('HT-1000')" '{"Price":899.00}'
os delete --store "$S" "ProductSet('HT-1001')"
# The service assigns sales order numbers: the store gives the new order a local key (~1) until flush.
os create --store "$S" SalesOrderSet '{"CustomerID":"0100000000","CurrencyCode":"EUR","Note":"Offline order"}'
local=$("$OS" query --store "$S" "SalesOrderSet?\$filter=Note eq 'Offline order'&\$select=SalesOrderID" | field SalesOrderID)
echo "the new order's local key: $local"
os create --store "$S" SalesOrderLineItemSet "{\"SalesOrderID\":\"$local\",\"ItemPosition\":\"0000000010\",\"ProductID\":\"HT-1000\",\"CurrencyCode\":\"EUR\",\"Quantity\":2,\"QuantityUnit\":\"EA\",\"Note\":\"Offline item\"}"
os query --store "$S" "RequestQueue?\$select=RequestID,Method,EntitySet,EntityKey&\$orderby=RequestID" --format table

step "7. flush: upload the queue to Gateway (CSRF token, multipart \$batch, MERGE)"
os flush --store "$S"
created=$(curl -sS -f -H 'Accept: application/json' "$SVC/ProductSet('HT-9001')?\$select=Name" | field Name)
price=$(curl -sS -f -H 'Accept: application/json' "$SVC/ProductSet('HT-1000')?\$select=Price" | field Price)
gone=$(curl -sS -o /dev/null -w '%{http_code}' "$SVC/ProductSet('HT-1001')")
echo "on the server: HT-9001 is '$created', HT-1000 costs $price, HT-1001 answers $gone"
[ "$created" = "Notebook Offline 14" ] && [ "$price" = "899.000" ] && [ "$gone" = 404 ] || fail "the server does not show the flushed changes"
order=$("$OS" query --store "$S" "SalesOrderSet?\$filter=Note eq 'Offline order'&\$select=SalesOrderID" | field SalesOrderID)
items=$(curl -sS -f -H 'Accept: application/json' "$SVC/SalesOrderSet('$order')/ToLineItems?\$select=Note" | grep -c '"Note": "Offline item"' || true)
echo "the order is $order on the server and in the store, with $items item"
case "$order" in "~"* | "") fail "the order has no key from the service" ;; esac
[ "$items" = 1 ] || fail "the order's item is not on the server"

# A write to the server as another client makes it: CSRF token and session cookie first.
csrf() {
    curl -sS -D - -o /dev/null -c "$WORK/cookies" -H 'X-CSRF-Token: Fetch' "$SVC/" \
        | awk 'tolower($1)=="x-csrf-token:"{print $2}' | tr -d '\r'
}
server() { # METHOD PATH [BODY]: prints the HTTP status
    token=$(csrf)
    curl -sS -o "$WORK/server.out" -w '%{http_code}' -b "$WORK/cookies" -X "$1" -H "X-CSRF-Token: $token" \
        -H 'Content-Type: application/json' -H 'Accept: application/json' -H 'If-Match: *' \
        ${3:+-d "$3"} "$SVC/$2"
}

step "8. a change on the server (another client): HT-1002 gets a new name"
echo "MERGE ProductSet('HT-1002') -> $(server MERGE "ProductSet('HT-1002')" '{"Name":"Notebook Basic 19 (2026)"}')"

step "9. refresh: the store shows the server's change"
os refresh --store "$S"
name=$("$OS" get --store "$S" "ProductSet('HT-1002')" | field Name)
echo "HT-1002 in the store: '$name'"
[ "$name" = "Notebook Basic 19 (2026)" ] || fail "the refresh did not bring the server's change"

step "10. a refused change: another client creates HT-9100 first; ours is refused"
echo "POST ProductSet (HT-9100, by another client) -> $(server POST ProductSet '{"ProductID":"HT-9100","Name":"Their Tablet"}')"
os create --store "$S" ProductSet '{"ProductID":"HT-9100","TypeCode":"PR","Category":"Tablets","Name":"Our Tablet","SupplierID":"0100000000","TaxTarifCode":1,"MeasureUnit":"EA","CurrencyCode":"EUR","Price":499.00}'
if os flush --store "$S"; then fail "the duplicate create was not refused"; fi
os errors --store "$S" > "$WORK/errors.json"
cat "$WORK/errors.json"
id=$(field RequestID < "$WORK/errors.json")
[ -n "$id" ] || fail "no refused request in the ErrorArchive"
echo "refused: request $id ($(field Message < "$WORK/errors.json"))"

step "11. fix and re-send: the other client withdraws HT-9100; our create goes again, unchanged"
echo "DELETE ProductSet('HT-9100') -> $(server DELETE "ProductSet('HT-9100')")"
os errors --store "$S" --retry "$id"
os flush --store "$S"
name=$(curl -sS -f -H 'Accept: application/json' "$SVC/ProductSet('HT-9100')?\$select=Name" | field Name)
echo "on the server: HT-9100 is '$name'"
[ "$name" = "Our Tablet" ] || fail "the re-sent create is not on the server"

step "12. refresh and check: the store equals the service, the queue and the ErrorArchive are empty"
os refresh --store "$S"
os query --store "$S" "ProductSet?\$filter=startswith(ProductID,'HT-9')&\$select=ProductID,Name" --format table
os query --store "$S" "SalesOrderLineItemSet?\$filter=Note eq 'Offline item'&\$select=SalesOrderID,ItemPosition,ProductID,Quantity" --format table
left=$("$OS" query --store "$S" "RequestQueue?\$count=true&\$top=0" | field '@odata.count')
errors=$("$OS" query --store "$S" "ErrorArchive?\$count=true&\$top=0" | field '@odata.count')
echo "requests left: $left, errors: $errors"
[ "$left" = 0 ] && [ "$errors" = 0 ] || fail "requests or errors are left"
os check --store "$S"

printf '\nthe SAP Gateway example ran to the end\n'
