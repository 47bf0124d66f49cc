"""Packaging for treepe_nb: every setting is read from `settings.ini` (nbdev 2 layout)."""
from configparser import ConfigParser
from pathlib import Path

import setuptools

here = Path(__file__).parent
config = ConfigParser(delimiters=["="])
config.read(here / "settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

licenses = {"apache2": ("Apache Software License 2.0", "OSI Approved :: Apache Software License")}
statuses = ["1 - Planning", "2 - Pre-Alpha", "3 - Alpha", "4 - Beta", "5 - Production/Stable",
            "6 - Mature", "7 - Inactive"]
lic_name, lic_classifier = licenses[cfg["license"]]
min_python = cfg["min_python"]
requirements = cfg.get("requirements", "").split()
# every `NAME_requirements` line is the extra NAME (plots, stats, code, hf, ...); `dev` also installs all the others
extras = {key[:-len("_requirements")]: cfg[key].split() for key in cfg if key.endswith("_requirements")}
extras["dev"] = extras.get("dev", []) + [r for name, reqs in extras.items() if name != "dev" for r in reqs]
readme = here / "README.md"

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else cfg["description"],
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    url=cfg.get("repo_url", "").strip() or None,  # git_url is a placeholder nbdev needs; repo_url once published
    license=lic_name,
    keywords=cfg["keywords"].split(),
    classifiers=[
        f"Development Status :: {statuses[int(cfg['status']) - 1]}",
        f"Intended Audience :: {cfg['audience'].title()}",
        f"License :: {lic_classifier}",
        f"Natural Language :: {cfg['language'].title()}",
        "Programming Language :: Python :: 3",
        f"Programming Language :: Python :: {min_python}",
    ],
    packages=setuptools.find_packages(include=[cfg["lib_name"], cfg["lib_name"] + ".*"]),
    # data files shipped inside the package (settings.ini `package_data`: globs under the package folder), e.g. the
    # YAML sample corpus with its NOTICE and licence texts; MANIFEST.in lists the same files for the sdist
    package_data={cfg["lib_name"]: cfg.get("package_data", "").split()},
    include_package_data=False,
    python_requires=f">={min_python}",
    install_requires=requirements,
    extras_require=extras,
    zip_safe=False,
    entry_points={"nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
                  "console_scripts": cfg.get("console_scripts", "").split()},
)
