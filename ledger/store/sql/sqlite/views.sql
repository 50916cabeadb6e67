-- Saved views (ledger.store.views): the table saved_views, one row per operator and view name (its primary key).

-- name: save
-- A view inserted, or the operator's view of that name replaced (its group, filter and time).
INSERT INTO saved_views (operator, name, grp, filter, created_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (operator, name) DO UPDATE SET grp = excluded.grp, filter = excluded.filter,
    created_at = excluded.created_at;

-- name: list_views
-- An operator's saved views, by name.
SELECT operator, name, grp, filter, created_at FROM saved_views WHERE operator = ? ORDER BY name;

-- name: delete
DELETE FROM saved_views WHERE operator = ? AND name = ?;
