"""Fixtures of the Lightning-module tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread_and_seeded():
    # Models this small gain nothing from a second thread, and lose a lot when the cores are busy.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)
