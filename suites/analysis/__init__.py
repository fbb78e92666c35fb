"""What a run file says once read: estimates, errors, constants, savings, fits."""
