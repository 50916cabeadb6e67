"""The console's screens: overview, job list, job, triage, quotas, notifications, help and confirmation."""
