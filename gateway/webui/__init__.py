"""The account page at ``/app/`` (docs/dashboard.md): the files ``webapp/`` builds, served by every replica."""
