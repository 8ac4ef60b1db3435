"""Paths shared by the sagemaker_deploy and image tests."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_MODELS = REPO / "tests" / "fixtures" / "models"
