"""Helpers shared by the test layers: servers, fakes, factories, oracles."""
