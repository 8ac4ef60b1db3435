"""`python -m sagemaker_deploy`: see sagemaker_deploy/cli.py."""

import sys

from sagemaker_deploy.cli import main

sys.exit(main())
