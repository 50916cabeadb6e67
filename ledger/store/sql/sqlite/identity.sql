-- The file that holds the ledger: its full path (the outcome journal sits beside it, named after it: ledger.journal).

-- name: database
SELECT file FROM pragma_database_list WHERE name = 'main';
