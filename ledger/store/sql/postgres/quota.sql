-- The daily quota counters (ledger.store.quota): the table quota_usage, served by its primary key (operation, day).

-- name: usage
-- What an operation used on each day of a range (both ends included).
SELECT day, used FROM quota_usage WHERE operation = %s AND day >= %s AND day <= %s;

-- name: used
SELECT used FROM quota_usage WHERE operation = %s AND day = %s;

-- name: count
-- Count one reservation against an operation's day.
INSERT INTO quota_usage (operation, day, used) VALUES (%s, %s, 1)
ON CONFLICT (operation, day) DO UPDATE SET used = quota_usage.used + 1;
