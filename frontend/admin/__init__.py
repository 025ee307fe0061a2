"""Admin and roll-out: the Admin service (admin keys only) and the use cases behind it.

service.py         AdminService: register, push, routes, promote, roll back, retire, drain
rollout.py         Rollout: route changes with their record, promote, roll back, retire
push.py            the model repository and uploads into it (checked, staged, moved in)
artifact_calls.py  a push that ends with the version loaded, and repository downloads
"""
