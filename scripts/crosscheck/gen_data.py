"""Deterministic fixture data for the cross-check (EPM schema of fixtures/metadata.xml).

Only ``random.Random(seed).random()`` is used (its sequence is guaranteed stable across
Python versions), so the same seed gives byte-identical files everywhere.

    python3 gen_data.py OUTDIR [--seed N]

writes OUTDIR/{BusinessPartners,Products,SalesOrders,SalesOrderItems}.json as
OData JSON ``{"value":[...]}`` with decimals written as exact JSON numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sys
from decimal import Decimal

SEED = 20261121
SETS = ("BusinessPartners", "Products", "SalesOrders", "SalesOrderItems")


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def f(self) -> float:
        return self.r.random()

    def int(self, lo: int, hi: int) -> int:  # inclusive
        return lo + int(self.f() * (hi - lo + 1))

    def pick(self, items):
        return items[int(self.f() * len(items))]

    def chance(self, p: float) -> bool:
        return self.f() < p

    def decimal(self, lo: int, hi: int, scale: int) -> Decimal:
        units = self.int(lo * 10**scale, hi * 10**scale)
        return Decimal(units).scaleb(-scale)

    def instant(self, year_lo: int = 2019, year_hi: int = 2024, fractional: bool = False) -> str:
        base = dt.datetime(year_lo, 1, 1)
        span = (dt.datetime(year_hi + 1, 1, 1) - base).total_seconds()
        t = base + dt.timedelta(seconds=int(self.f() * span))
        offset = self.pick(["Z", "Z", "Z", "+02:00", "-05:00", "+05:30", "+09:00", "-03:30", "+01:00"])
        frac = ""
        if fractional and self.chance(0.3):
            frac = "." + "%03d" % self.int(1, 999)
        return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + offset

    def date(self, year_lo: int = 2021, year_hi: int = 2023) -> str:
        base = dt.date(year_lo, 1, 1)
        days = (dt.date(year_hi + 1, 1, 1) - base).days
        return (base + dt.timedelta(days=int(self.f() * days))).isoformat()


COMPANIES = [
    "SAP", "Becker Berlin", "DelBont Industries", "O'Neil & Söhne", "Müller GmbH", "Ørsted A/S",
    "東京商事", "  Padded Corp  ", 'Quote "Q" Ltd', "lowercase inc", "UPPER AG", "Ça Va SARL",
    "Zürich Versicherung", "Smile 😀 Co", "Straße Bau", "Talpa", "Panorama Studios", "TECUM",
    "Asia High tech", "Laurent", "AVANTEL", "Telecomunicaciones Star", "Vente Et Réparation",
    "New Line Design", "HEPA Tec", "Anav Ideon", "Robert Brown", "Mexican Oil Trading",
    "it's-a-dash", "Ébène Bois", "Apple Farm", "apple farm",
]
CITIES = ["Walldorf", "Berlin", "Fremont", "Paris", "Tokyo", "Pune", "Mexico City", "São Paulo",
          "Köln", "Boston", "Lyon", "München"]
COUNTRIES = ["DE", "US", "FR", "JP", "IN", "MX", "BR", "ES"]
CATEGORIES = ["Notebooks", "Tablets", "Smartphones", "Headsets", "Printers", "Software", "Écrans"]
NOTES = ["rush", "Deliver to \"dock 7\"", "l'été prochain", "call first", "  spaced  ", "Ünïcödé ✓",
         "50% off", "a_b", "RUSH", "don't ship before noon", "—", ""]


def generate(seed: int = SEED) -> dict[str, list[dict]]:
    g = Gen(seed)
    partners = []
    for i, name in enumerate(COMPANIES):
        country = None if g.chance(0.12) else g.pick(COUNTRIES)
        address = None
        if not g.chance(0.1):
            address = {
                "City": None if g.chance(0.1) else g.pick(CITIES),
                "PostalCode": "%05d" % g.int(1000, 99999),
                "Street": None if g.chance(0.15) else "%s %d" % (g.pick(["Main St", "Hauptstraße", "Rue d'Or"]), g.int(1, 200)),
                "Country": country,
            }
        partners.append({
            "BusinessPartnerID": "BP%04d" % (i + 1),
            "CompanyName": name,
            "Country": country,
            "EmailAddress": None if g.chance(0.2) else "contact%d@partner%d.example" % (i, g.int(1, 9)),
            "CurrencyCode": g.pick(["EUR", "USD", "JPY", None]),
            "Address": address,
            "CreatedAt": None if g.chance(0.1) else g.instant(fractional=True),
        })
    bp_ids = [p["BusinessPartnerID"] for p in partners]

    products = []
    for i in range(60):
        cat = None if g.chance(0.08) else g.pick(CATEGORIES)
        scale = g.pick([0, 1, 2, 3])
        price = None if g.chance(0.1) else g.decimal(-500, -1, scale) if g.chance(0.08) else g.decimal(1, 5000, scale)
        weight = None if g.chance(0.1) else g.pick([0.5, 1.5, 2.5, -0.5, -1.5, 2.25, 0.0]) if g.chance(0.3) else round(g.f() * 40 - 5, 3)
        name = None if g.chance(0.07) else "%s %d" % ((cat or "Misc").rstrip("s"), i)
        if i % 11 == 3:
            name = "Spécial '%d'" % i
        products.append({
            "ProductID": "HT-%04d" % (1000 + i),
            "Name": name,
            "Category": cat,
            "SupplierID": None if g.chance(0.1) else g.pick(bp_ids),
            "Price": price,
            "CurrencyCode": g.pick(["USD", "EUR", None]),
            "WeightMeasure": weight,
        })
    # Fixed edge values: halves for round() (away from zero), a 16-digit decimal, tiny and large doubles.
    products[5]["Price"] = Decimal("1417.5")
    products[6]["Price"] = Decimal("-2.500")
    products[7]["Price"] = Decimal("1234567890123.456")
    products[8]["WeightMeasure"] = -2.5
    products[9]["WeightMeasure"] = 1e-7
    products[10]["WeightMeasure"] = 12345678.875
    product_ids = [p["ProductID"] for p in products]

    orders, items = [], []
    for i in range(90):
        so_id = "SO%05d" % (i + 1)
        orders.append({
            "SalesOrderID": so_id,
            "CustomerID": None if g.chance(0.08) else g.pick(bp_ids),
            "GrossAmount": None if g.chance(0.08) else g.decimal(-2000, -1, g.pick([0, 2, 3])) if g.chance(0.1) else g.decimal(0, 90000, g.pick([0, 2, 3])),
            "CurrencyCode": g.pick(["USD", "EUR", "JPY", None]),
            "LifecycleStatus": None if g.chance(0.1) else g.pick(["N", "P", "C"]),
            "CreatedAt": None if g.chance(0.08) else g.instant(2020, 2023),
            "Note": None if g.chance(0.35) else g.pick(NOTES) + ("" if g.chance(0.5) else " #%d" % i),
        })
        n_items = g.pick([0, 1, 2, 3, 3, 4, 5, 6])
        for pos in range(1, n_items + 1):
            items.append({
                "SalesOrderID": so_id,
                "ItemPosition": pos * 10,
                "ProductID": None if g.chance(0.05) else g.pick(product_ids),
                "Quantity": None if g.chance(0.07) else g.int(-3, 50),
                "NetAmount": None if g.chance(0.07) else g.decimal(-100, -1, g.pick([0, 1, 2, 3])) if g.chance(0.08) else g.decimal(0, 9000, g.pick([0, 1, 2, 3])),
                "CurrencyCode": g.pick(["USD", "EUR", None]),
                "DeliveryDate": None if g.chance(0.1) else g.date(),
            })
    return {"BusinessPartners": partners, "Products": products, "SalesOrders": orders, "SalesOrderItems": items}


def dumps(value) -> str:
    """JSON with Decimal written as an exact number (its scale kept)."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def write(outdir: str, seed: int = SEED) -> dict[str, str]:
    os.makedirs(outdir, exist_ok=True)
    data = generate(seed)
    paths = {}
    for name in SETS:
        path = os.path.join(outdir, name + ".json")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write('{"value":[\n' + ",\n".join(dumps(e) for e in data[name]) + "\n]}\n")
        paths[name] = path
    return paths


if __name__ == "__main__":
    args = sys.argv[1:]
    seed = SEED
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    out = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "data")
    for name, path in write(out, seed).items():
        print(path)
