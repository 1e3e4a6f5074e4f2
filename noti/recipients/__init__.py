"""Recipients: profiles, preferences, quiet hours, templates and locales (issue 34)."""
