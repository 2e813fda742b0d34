"""CI: fail a pull request that changes owned files (golden datasets, judge prompts) without an
approving review by an owner — `.github/workflows/approvals.yml` runs it; the rule and its exit
codes are in app/integrations/approvals.py.

    GITHUB_TOKEN=… python scripts/check_approvals.py --repo owner/name --pr 7
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.integrations.approvals import main

if __name__ == "__main__":
    raise SystemExit(main())
